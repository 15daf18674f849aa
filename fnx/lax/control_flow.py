"""Control flow as primitives holding sub-IRs: cond, switch, while_loop, fori_loop, scan, map."""
__all__ = []
