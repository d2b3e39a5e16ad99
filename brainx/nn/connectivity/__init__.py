"""Connectivity between populations: event-driven and sparse projections and the backend that
runs their kernels (re-exported by :mod:`brainx.nn`; see docs/event-driven.md)."""
