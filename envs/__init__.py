"""Environments the lectures and experiments need that gymnasium lacks."""
