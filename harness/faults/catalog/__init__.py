"""The faults a lab can be given, one module each, found by walking this folder
(harness/faults/injector.py says what a module holds): a new fault is one new file here."""
