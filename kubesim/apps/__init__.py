"""Behaviour models of the container images the farm deploys (what each needs to start and to
serve, what it logs, how it fails), looked up by image and command, and their call graphs."""

from kubesim.apps.model import AppModel, Exited, StartContext, Started, find_model, image_lookup, models

__all__ = ["AppModel", "Exited", "StartContext", "Started", "find_model", "image_lookup", "models"]
