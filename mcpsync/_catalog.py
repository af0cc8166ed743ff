"""Resources, prompts and completion: the Session's catalogue one-liners.

Owns: ``Catalog``, a mixin over the Session's declared request helpers (``_submit``,
``_call``, ``_paginate``, ``_wait``, ``_require``), holding the blocking calls and their
``submit_*`` twins for ``resources/*`` (with subscriptions), ``prompts/*`` and
``completion/complete``. The era (``mcpsync.protocol``) decides how each goes out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from ._typed import validate as _validate
from .connection import DEFAULT, Connection, Default, Progress
from .protocol import Era, Interest

if TYPE_CHECKING:
    from mcp_types import (
        CompleteResult,
        GetPromptResult,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
    )

__all__ = ["Catalog"]


class Catalog:
    """The catalogue half of ``Session``: the state it declares is the Session's own."""

    _conn: Connection
    _era: Era
    _interest: Interest

    if TYPE_CHECKING:

        def _require(self, method: str) -> None: ...
        def _submit(
            self,
            method: str,
            params: dict[str, Any] | None,
            convert: Callable[[Any], Any],
            *,
            timeout: float | None | Default = DEFAULT,
            on_progress: Callable[[Progress], None] | None = None,
            reset_timeout_on_progress: bool = False,
            max_timeout: float | None = None,
        ) -> Future[Any]: ...
        def _call(
            self,
            method: str,
            params: dict[str, Any] | None,
            convert: Callable[[Any], Any],
            *,
            timeout: float | None | Default = DEFAULT,
        ) -> Any: ...
        def _paginate(
            self,
            method: str,
            key: str,
            model: str,
            params: dict[str, Any] | None = None,
            timeout: float | None | Default = DEFAULT,
        ) -> Future[Any]: ...
        def _wait(self, future: Future[Any]) -> Any: ...

    # -- resources ---------------------------------------------------------------------

    def submit_list_resources(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[Resource]]:
        return self._paginate("resources/list", "resources", "Resource", timeout=timeout)

    def list_resources(self, *, timeout: float | None | Default = DEFAULT) -> list[Resource]:
        """Every resource the server lists (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_resources(timeout=timeout)))

    def submit_list_resource_templates(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[ResourceTemplate]]:
        return self._paginate(
            "resources/templates/list", "resourceTemplates", "ResourceTemplate", timeout=timeout
        )

    def list_resource_templates(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> list[ResourceTemplate]:
        """Every resource template (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_resource_templates(timeout=timeout)))

    def submit_read_resource(
        self, uri: str, *, timeout: float | None | Default = DEFAULT
    ) -> Future[ReadResourceResult]:
        return self._submit(
            "resources/read",
            {"uri": str(uri)},
            lambda r: _validate("ReadResourceResult", r),
            timeout=timeout,
        )

    def read_resource(
        self, uri: str, *, timeout: float | None | Default = DEFAULT
    ) -> ReadResourceResult:
        """Read one resource; ``.contents`` holds text or blob parts."""
        return self._call(
            "resources/read",
            {"uri": str(uri)},
            lambda r: _validate("ReadResourceResult", r),
            timeout=timeout,
        )

    def subscribe_resource(self, uri: str, callback: Callable[[str], None]) -> None:
        """Ask to be told when ``uri`` changes; ``callback(uri)`` runs on the dispatch thread."""
        uri = str(uri)
        if self._interest.add_uri(uri, callback):
            try:
                self._require("resources/subscribe")
                self._era.subscribe(uri, self._conn.default_timeout)
            except BaseException:
                self._interest.drop_uri(uri)
                raise

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop updates for ``uri``."""
        uri = str(uri)
        if self._interest.drop_uri(uri):
            self._era.unsubscribe(uri, self._conn.default_timeout)

    # -- prompts -----------------------------------------------------------------------

    def submit_list_prompts(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[Prompt]]:
        return self._paginate("prompts/list", "prompts", "Prompt", timeout=timeout)

    def list_prompts(self, *, timeout: float | None | Default = DEFAULT) -> list[Prompt]:
        """Every prompt (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_prompts(timeout=timeout)))

    def submit_get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
    ) -> Future[GetPromptResult]:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {k: str(v) for k, v in arguments.items()}
        return self._submit(
            "prompts/get", params, lambda r: _validate("GetPromptResult", r), timeout=timeout
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
    ) -> GetPromptResult:
        """Render a prompt with its arguments."""
        return self._wait(self.submit_get_prompt(name, arguments, timeout=timeout))

    # -- completion, logging -------------------------------------------------------------

    def submit_complete(
        self,
        ref: Mapping[str, Any],
        argument_name: str,
        value: str,
        context_arguments: Mapping[str, str] | None = None,
    ) -> Future[CompleteResult]:
        params: dict[str, Any] = {
            "ref": dict(ref),
            "argument": {"name": argument_name, "value": value},
        }
        if context_arguments:
            params["context"] = {"arguments": dict(context_arguments)}
        return self._submit("completion/complete", params, lambda r: _validate("CompleteResult", r))

    def complete(
        self,
        ref: Mapping[str, Any],
        argument_name: str,
        value: str,
        context_arguments: Mapping[str, str] | None = None,
    ) -> CompleteResult:
        """Completion suggestions for an argument of a prompt or resource template.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``.
        """
        return self._wait(self.submit_complete(ref, argument_name, value, context_arguments))
