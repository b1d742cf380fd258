"""pylib: the numerical core of the course (NumPy only, runs in CPython and in Pyodide).

Import the submodule you need (`from pylib import model`); nothing is imported eagerly.
"""
