"""ppv's Python side: ppv.record writes inference recordings of a pipeline's
stage 0 that `ppv conform` checks against the PP inference contract and
`ppv replay` re-runs; ppv.digest is the reference implementation of every
digest ppv writes (spec/digests.md); ppv.dist runs torch.distributed code
under `ppv fuzz py`; ppv.cli runs the ppv program and ppv.pytest makes
gates of it in a pytest suite. Importable from the source tree
(PYTHONPATH=python), from where `cmake --install` and the .deb put it
(PREFIX/lib/python3/dist-packages), or after `pip install ./python`."""

__version__ = "0.1.0"  # the project's version (CMakeLists.txt); test_install checks they agree
