"""Every key fairtune reads or writes in an Optuna study: one bottom module, imports nothing.

Optuna keeps its reserved attribute names as module constants; fairtune does the same, in one
place, so that a key is spelled once and a reader finds every key the library stores. Modules
that document a key publicly re-export it under its public name.

Study user attributes (what a study was tuned with and what it found):
"""

from __future__ import annotations

PREFIX = "fairtune:"
"""The prefix of every key; also of the raw metric values ``"fairtune:<metric>"``."""

# -- study user attributes -----------------------------------------------------------------
SETUP_KEY = "fairtune:setup"
"""The setup record of a study: every argument that changes what a trial's score means
(see :mod:`fairtune.tuning._setup`)."""
TENANT_SETUP_PREFIX = "fairtune:setup:"
"""``"fairtune:setup:<tenant>"``: the setup record of one tenant of a shared study."""
LIMITS_KEY = "fairtune:limits"
DATASET_KEY = "fairtune:dataset"
MODEL_KEY = "fairtune:model"
METRIC_KEY = "fairtune:metric"
VALIDATION_KEY = "fairtune:validation"
OBJECTIVES_KEY = "fairtune:objectives"
DATA_KEY = "fairtune:data_fingerprint"
MITIGATION_SETUP_KEY = "fairtune:mitigation"
TEST_SCORES_KEY = "fairtune:test_scores"
TENANT_TEST_SCORES_PREFIX = "fairtune:test_scores:"
CERTIFICATE_KEY = "fairtune:certificate"
"""The certificate of the deployed model (``confidence=``), or the refusal's text; a tenant's
under ``"fairtune:certificate:<tenant>"``."""
"""``"fairtune:test_scores:<tenant>"``: a tenant's test lines in a study that tenants share."""

# -- trial user attributes -----------------------------------------------------------------
FAIR_KEY = "fairtune:fair"
TENANT_KEY = "fairtune:tenant"
VALIDATION_ERROR_KEY = "fairtune:validation_error"
POSITIVE_RATE_KEY = "fairtune:positive_rate"
POSITIVE_RATES_KEY = "fairtune:positive_rate_by_group"
MITIGATION_USED_KEY = "fairtune:mitigation_used"
SENSITIVE_AT_PREDICTION_KEY = "fairtune:sensitive_at_prediction"
RUNGS_KEY = "fairtune:rungs"
SPLIT_SCORES_KEY = "fairtune:split_scores"
FIT_TIMES_KEY = "fairtune:fit_times"
SCORE_TIMES_KEY = "fairtune:score_times"
ERROR_KEY = "fairtune:error"
CNN_DIVERGED_KEY = "fairtune:cnn_diverged"

# -- system attributes (sampler and board state) --------------------------------------------
FINISHED_KEY = "fairtune:finished_at_creation"
RELATIVE_PARAMS_KEY = "fairtune:relative_params"
CLAIM_TIME_KEY = "fairtune:relative_params_time"
COLLAB_PLAN_PREFIX = "fairtune:collab:plan"
COLLAB_ROUND_KEY = "fairtune:collab:round"
COLLAB_SEED_KEY = "fairtune:collab:seed"
CGP_CLHS_SLOT_KEY = "fairtune:cgp:clhs_slot"
TASK_CORRELATION_KEY = "fairtune:mtkb:task_correlation"
BOARD_SEED_KEY = "fairtune:board:seed"
BOARD_AGENT_PREFIX = "fairtune:board:agent:"
BOARD_POST_PREFIX = "fairtune:board:post:"
