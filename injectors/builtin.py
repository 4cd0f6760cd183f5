"""Imports every module that registers fault injectors (the `faults` registry loads this)."""

from injectors import (  # noqa: F401  (imported for their @faults.register side effects)
    app_admission,
    app_batch,
    app_config,
    app_data,
    app_edge,
    app_finalizers,
    app_network,
    app_resources,
    app_security,
    chaos,
    feature_flags,
    load,
    node_faults,
    operator,
)
