"""``--line`` / ``--zone`` / ``--anchor`` / ``--dwell`` / ``--hysteresis``: parsing, errors naming
the flag (exit 2, one line), and the stage they build; the Python API's text forms."""

from __future__ import annotations

import pytest

from vidpipe.cli import build_parser
from vidpipe.cli._zone_args import needs_tracking, zone_stages
from vidpipe.errors import ConfigError
from vidpipe.zones import Line, Zone, Zones, line_from_value, parse_line, parse_zone, zone_from_value


def _args(*argv: str):
    return build_parser().parse_args(["detect", "clip.mp4", *argv])


def test_flags_build_one_zones_stage():
    args = _args("--line", "door=100,400,500,400", "--line", "gate=0,10,20,30:classes=person,bicycle",
                 "--zone", "bay=0,0,200,0,200,200,0,200:dwell=30:classes=car", "--zone", "lot=1,1,9,1,5,9",
                 "--anchor", "center", "--dwell", "5", "--hysteresis", "4")
    assert needs_tracking(args)
    (stage,) = zone_stages(args)
    assert isinstance(stage, Zones) and stage.anchor == "center" and stage.hysteresis == 4
    assert stage.default.lines == (Line("door", (100, 400), (500, 400)),
                                   Line("gate", (0, 10), (20, 30), classes=("person", "bicycle")))
    bay, lot = stage.default.zones
    assert bay.dwell == 30 and bay.classes == ("car",) and lot.dwell == 5.0  # --dwell fills in
    assert zone_stages(_args()) == [] and not needs_tracking(_args())


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--line", "door"], "argument --line: 'door': expected NAME=x1,y1,x2,y2"),
        (["--line", "door=1,2,3"], "a line is x1,y1,x2,y2 (4 numbers), got 3"),
        (["--line", "door=1,2,a,4"], "expected comma-separated numbers"),
        (["--line", "door=1,2,1,2"], "the two points are the same"),
        (["--line", "d o=1,2,3,4"], "must be letters, digits"),
        (["--line", "door=1,2,3,4:dwell=3"], "unknown option 'dwell=3'; a line takes :classes=..."),
        (["--zone", "bay=0,0,1,1"], "argument --zone: 'bay=0,0,1,1': a zone is x1,y1,x2,y2,x3,y3,... (3 or more"),
        (["--zone", "bay=0,0,1,1,2,2"], "encloses no area"),
        (["--zone", "bay=0,0,1,0,1,1,0"], "an even count of numbers"),
        (["--zone", "bay=0,0,1,0,1,1:dwell=-1"], "dwell must be a number of seconds > 0"),
        (["--line", "door=1,2,3,inf"], "finite"),
        (["--anchor", "feet"], "argument --anchor: invalid choice: 'feet'"),
        (["--hysteresis", "0"], "argument --hysteresis: expected frames from 1 to 1000"),
        (["--dwell", "0"], "argument --dwell: expected seconds > 0"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        _args(*argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert "Traceback" not in err


def test_duplicate_names_and_orphan_options_are_usage_errors(capsys):
    for argv, words in ((["--line", "a=0,0,1,1", "--line", "a=0,0,2,2"], "--line: the name 'a' is given twice"),
                        (["--dwell", "3"], "--dwell needs --line or --zone"),
                        (["--anchor", "center"], "--anchor needs --line or --zone")):
        with pytest.raises(SystemExit) as exc:
            zone_stages(_args(*argv))
        assert exc.value.code == 2
        assert words in capsys.readouterr().err


def test_python_text_forms_and_config_values_name_their_origin():
    assert parse_line("door=1,2,3,4") == Line("door", (1, 2), (3, 4))
    with pytest.raises(ConfigError, match=r"^lines 'x': expected NAME="):
        Zones(lines=["x"])
    with pytest.raises(ConfigError, match=r"^zones 'b=1,2': a zone is"):
        Zones(zones=["b=1,2"])
    assert line_from_value("door", [1, 2, 3, 4]) == Line("door", (1, 2), (3, 4))
    assert line_from_value("door", "1,2,3,4") == Line("door", (1, 2), (3, 4))
    assert zone_from_value("bay", {"points": [[0, 0], [4, 0], [4, 4]], "classes": ["car"], "dwell": 2}) == Zone(
        "bay", ((0, 0), (4, 0), (4, 4)), classes=("car",), dwell=2.0)
    with pytest.raises(ConfigError, match="unknown key 'dwel'"):
        zone_from_value("bay", {"points": [0, 0, 4, 0, 4, 4], "dwel": 2})
    with pytest.raises(ConfigError, match="no 'points:'"):
        line_from_value("door", {"classes": ["car"]})
    assert parse_zone("z=0,0,4,0,4,4:classes=1,2").classes == ("1", "2")
