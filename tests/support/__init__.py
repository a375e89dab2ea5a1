"""Helpers shared by test modules (on pytest's path through `pythonpath = tests`)."""
