"""The problem catalog: declarative problems P = (environment, interface, faults + noises,
oracles), their ground truth, loading, validation and mutation."""

from core.problem import FaultSpec, GroundTruth, MitigationStep, NoiseSpec, Problem

__all__ = ["FaultSpec", "GroundTruth", "MitigationStep", "NoiseSpec", "Problem"]
