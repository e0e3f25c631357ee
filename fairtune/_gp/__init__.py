"""Private GP engine of fairtune (torch float64 on CPU; never sees an Optuna study).

Modules: ``search_space`` (Optuna distributions <-> [0, 1]^d), ``kernels`` (Matern-5/2 ARD),
``gp`` (exact GP regression), ``classifier`` (GP classification), ``multitask`` (the ICM
multi-task GP and its Nystrom variant, for MT-KB), ``fantasy`` (CGP's fantasy models of
borrowed designs), ``acquisition`` (log EI, log PoF, UCB/LCB, information gain, cMES, and
the samplers' acquisitions as objects over fitted models), ``optim`` (acquisition
maximization). The numerics run under :mod:`fairtune._threads`'s thread limit. Import the
modules directly; this package imports nothing so that importing it stays cheap.
"""
