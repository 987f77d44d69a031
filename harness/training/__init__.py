"""Operator training: exercises (labs/*.yml) as data, the steps that break and fix a lab, and
the checks that tell a trainee whether it works again."""
