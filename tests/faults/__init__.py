"""Fault injection for tests: crashing builds and sweep workers, without hooks in the
product. ``builds.py`` is a build function the tests hand the build pool;
``sitecustomize.py`` (this directory on a child's PYTHONPATH) patches sweep workers."""
