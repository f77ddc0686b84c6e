"""Process-level set-up of a server process (app.main)."""

import gc

from app.main import GC_GEN0_THRESHOLD, tune_gc


def test_tune_gc_freezes_what_exists_and_collects_less_often():
    before = gc.get_threshold()
    try:
        tune_gc()
        # Modules, classes and schemas: what a server process keeps until it exits.
        assert gc.get_freeze_count() > 10_000
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 20, 20)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
