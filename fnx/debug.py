"""``fnx.debug``: printing and callbacks at run time under jit and vmap (being written)."""
