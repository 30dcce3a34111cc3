"""Benchmarks (programs, not tests): peers run in one process on the same input; results are
written as a markdown table, JSON and a PNG bar chart (:mod:`vidpipe.bench.report`), with wall
time, CPU use and GPU memory measured by :mod:`vidpipe.bench.sysstats`."""
