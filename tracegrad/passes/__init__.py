"""Pure graph -> graph rewrites (dead code, common subexpressions, folding, simplification)."""
