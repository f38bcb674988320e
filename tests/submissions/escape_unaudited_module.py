"""Class 2, a module beside the submission imported by a computed name: the grader audits only the modules
a submission imports with an import statement, so the worker refuses this one (line 10)."""
import sys

sys.path.insert(0, ".")
softmax = None
for name in ("good" + "_triton",):
    from importlib import import_module

    softmax = import_module(name).softmax
