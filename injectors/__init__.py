"""Faults and noises, and their composition. Every injector works through the cluster handle
(the Kubernetes API and Chaos Mesh resources), so it runs unchanged on emulated and real clusters."""

from injectors.injector import Injection, Injector, Noise, faults, noises

__all__ = ["Injection", "Injector", "Noise", "faults", "noises"]
