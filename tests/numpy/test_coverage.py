"""Coverage of NumPy's namespace: every public NumPy function that jax.numpy implements
(tests/numpy/jax_numpy_names.txt, with how it was made) is in tracegrad.numpy, except the
names of `MISSING`. The list may only shrink: a new gap fails, and so does a MISSING name
that now exists (remove it from the list)."""

import pathlib

import tracegrad.numpy as tnp

NAMES = pathlib.Path(__file__).with_name("jax_numpy_names.txt")

# Not yet in tracegrad.numpy (docs/numpy.md, "What it does not cover", says why).
MISSING = frozenset()


def _names() -> list[str]:
    lines = NAMES.read_text().splitlines()
    return [n.strip() for n in lines if n.strip() and not n.startswith("#")]


def test_every_jax_numpy_function_is_in_tracegrad_numpy_or_listed_missing():
    names = _names()
    have = [n for n in names if hasattr(tnp, n)]
    print(f"tracegrad.numpy has {len(have)} of the {len(names)} NumPy functions jax.numpy "
          f"implements; {len(names) - len(have)} missing")
    gaps = sorted(n for n in names if n not in have and n not in MISSING)
    assert not gaps, f"missing from tracegrad.numpy and not in MISSING: {gaps}"


def test_missing_list_only_shrinks():
    names = set(_names())
    assert MISSING <= names, f"MISSING names not in the list: {sorted(MISSING - names)}"
    done = sorted(n for n in MISSING if hasattr(tnp, n))
    assert not done, f"now in tracegrad.numpy: remove them from MISSING: {done}"
