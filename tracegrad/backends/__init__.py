"""Backends that turn an optimized FuncGraph into something callable."""
