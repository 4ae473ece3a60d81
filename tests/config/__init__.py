"""Configs (fastrl/config and the shipped configs): loading, checking, bad input, the papers' settings."""
