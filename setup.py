"""Builds the optional compiled twin of the batch codec (``storage/_batch.c``).

Everything else is declared in pyproject.toml. ``optional=True``: where no C compiler is
present the install still succeeds and ``compactlog.storage.batch`` uses the pure-Python
twin (``storage/_batch_py.py``), which behaves identically.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "compactlog.storage._batch",
            sources=["storage/_batch.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        )
    ]
)
