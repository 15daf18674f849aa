"""Hypothesis profiles for the suite: ``fnx-ci`` (10 examples per property, the default)
and ``fnx-thorough`` (200): ``HYPOTHESIS_PROFILE=fnx-thorough python -m pytest`` for a
deep local run."""
import os

from hypothesis import settings

from fnx.testing.strategies import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fnx-ci"))
