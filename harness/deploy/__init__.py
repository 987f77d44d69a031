"""The deploy wing: a topology file (or a plan) -> a running, converged lab in one call
(`lab.deploy`), and back to nothing (`lab.destroy_lab`), with the stages, convergence, the
memory gate and doctor's readiness verdicts beside them."""
