"""Graph -> graph transforms and the interpreters that run graphs."""
