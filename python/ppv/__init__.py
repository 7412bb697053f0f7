"""ppv's Python side: ppv.record writes inference recordings of a pipeline's
stage 0 that `ppv conform` checks against the PP inference contract and
`ppv replay` re-runs; ppv.digest is the reference implementation of every
digest ppv writes (spec/digests.md). Importable from the source tree (PYTHONPATH=python) or
from where `cmake --install` puts it (PREFIX/lib/python3/dist-packages)."""
