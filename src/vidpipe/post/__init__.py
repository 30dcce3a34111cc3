"""After the model: NMS, mapping boxes back to source pixels, comparing detection sets."""

from vidpipe.post.boxes import to_source
from vidpipe.post.match import MatchReport, match_detections
from vidpipe.post.nms import grouped_nms, nms

__all__ = ["MatchReport", "grouped_nms", "match_detections", "nms", "to_source"]
