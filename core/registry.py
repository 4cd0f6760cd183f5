"""Plugin registries: a lowercase decorator registers a factory, `create(name, **args)` builds it
and tags the instance with the spec it was built from, so a trial can be rebuilt from its row."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class PluginSpec(BaseModel):
    """What a plugin was created with: enough to create it again."""

    kind: str
    name: str
    args: dict[str, Any] = {}


class Registry(Generic[T]):
    """Factories of one plugin family, looked up by name. Modules listed in `modules` are
    imported on first lookup so that built-in plugins register themselves lazily."""

    def __init__(self, kind: str, modules: Iterable[str] = (), plugins_env: str | None = "FARM_PLUGINS") -> None:
        self.kind = kind
        self._plugins_env = plugins_env
        self._modules = list(modules)
        self._loaded = False
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories and self._factories[name] is not factory:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._factories[name] = factory
            return factory

        return decorate

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._modules:
                importlib.import_module(module)
            # Users' own plugins (agents, injectors, ...) register the same way: list their
            # modules in FARM_PLUGINS and every worker imports them.
            for module in filter(None, os.environ.get(self._plugins_env or "", "").split(",")):
                importlib.import_module(module.strip())

    def names(self) -> list[str]:
        self._load()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._factories

    def factory(self, name: str) -> Callable[..., T]:
        self._load()
        try:
            return self._factories[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise KeyError(f"unknown {self.kind} '{name}' (known: {known})") from None

    def create(self, name: str, **args: Any) -> T:
        obj = self.factory(name)(**args)
        try:
            obj.plugin_spec = PluginSpec(kind=self.kind, name=name, args=args)  # type: ignore[attr-defined]
        except AttributeError:  # slotted or frozen objects simply go untagged
            pass
        return obj
