"""Build step beyond pyproject.toml: compile the record reader with mypyc.

``jbod_broker.storage.record_reader`` walks every record of every produced batch, and as plain
Python that walk cost as much as the rest of an append (docs/benchmarks.md, issue 14). mypyc
compiles that one module from its own source, so there is still a single reader; everything else
stays plain Python. The extension is optional: where it cannot be built (no C compiler, no
mypy) the same module runs interpreted, correct but slower. Editable installs (``make setup``)
put the compiled module beside its source, where it is imported in preference to it.
"""

from setuptools import setup

try:
    from mypyc.build import mypycify
except ImportError:  # a build without mypy: the reader runs as plain Python
    ext_modules = []
else:
    ext_modules = mypycify(["broker_image/jbod_broker/storage/record_reader.py"], opt_level="3")
    for ext in ext_modules:
        ext.optional = True

setup(ext_modules=ext_modules)
