"""Which tier each test belongs to: one table from test files (or, in a mixed file, test names)
to markers, read by ``conftest.py`` at collection time.

The markers themselves are registered in ``pyproject.toml`` (``--strict-markers``); this module
only says which tests carry them, so a file needs no ``pytestmark`` line and a renamed test
file is one edit here (a file moved to another folder is none: rules name files, not folders;
tests/README.md). A rule is ``"file.py"`` (every test in the file) or ``"file.py::pattern"``
(the tests whose name matches the ``fnmatch`` pattern; parametrised ids are matched without
their ``[...]`` part). A test gets the union of the markers of every
rule that matches it, plus any it declares itself.

The tiers ``scripts/test`` runs:

* ``QUICK``: unit and protocol tests, no server process, no stress, fork or browser;
  ``bash scripts/test --quick`` (under two minutes on two cores).
* ``PARALLEL``: everything else that does not assert a wall-clock bound, spread over
  pytest-xdist workers.
* ``SERIAL`` (the name kept): the ``timing`` tests, after the parallel run, on their own
  xdist workers (4 by default): they spend their time waiting for the bound they check, and
  each bound holds with both CPUs kept busy by other processes (``scripts/loaded-runs``).

``conftest.py`` checks the ``real_server`` and ``fork`` rules as it runs: a test that starts a
process (``subprocess``, ``os.fork``, ``os.posix_spawn``) without one of them fails, so the
quick tier cannot silently start servers.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

# Markers that may start processes (checked by conftest's spawn audit).
SPAWNING = frozenset({"real_server", "fork", "browser", "real"})

QUICK = "not (real_server or stress or fork or browser or slow or real)"
PARALLEL = "not timing"
SERIAL = "timing"

# File rules first, then the tests of mixed files. Made from a measured run (spawn audit +
# --durations, 2 cores, 2026-12-05) and a scan for asserts on elapsed times; kept by hand since.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("test_adapters_anthropic.py", ("real_server",)),
    ("test_adapters_gemini.py", ("real_server",)),
    ("test_adapters_host.py::test_a_host_with_server_everything_and_the_demo", ("real_server",)),
    ("test_adapters_langchain.py", ("real_server",)),
    ("test_adapters_openai.py", ("real_server",)),
    ("test_apps.py", ("real_server",)),
    (
        "test_telemetry_memory.py::test_carried_takes_the_context_to_another_process",
        ("real_server",),
    ),
    ("test_telemetry_docs.py", ("real_server",)),
    ("test_telemetry_real.py", ("real_server",)),
    ("test_apps_browser.py", ("browser", "real_server")),
    ("test_apps_real.py", ("browser", "real_server")),
    ("test_auth_device.py::test_cancel_from_another_thread_ends_the_wait", ("timing",)),
    ("test_auth_device.py::test_ctrl_c_interrupts_the_wait", ("timing",)),
    ("test_auth_dpop.py::test_a_stored_dpop_token_works_in_the_next_process", ("real_server",)),
    ("test_auth_dpop.py::test_auto_needs_both_sides_opt_in_forces_it", ("slow",)),
    ("test_auth_e2e_auto.py", ("real_server",)),
    ("test_auth_e2e_device.py", ("real_server",)),
    ("test_auth_e2e_dpop.py", ("real_server",)),
    ("test_auth_e2e_oidc.py", ("real_server",)),
    ("test_auth_session.py", ("real_server",)),
    ("test_auth_store_cli.py::test_keyring_store_round_trip", ("real_server",)),
    ("test_auth_wif.py::test_official_suite_expired_assertion_is_never_sent", ("real_server",)),
    (
        "test_auth_wif.py::test_official_suite_wrong_audience_is_refused_once_and_typed",
        ("real_server",),
    ),
    ("test_bringup.py", ("real_server",)),
    ("test_bringup.py::test_a_slow_starter_pays_no_fixed_probe_cost", ("timing",)),
    ("test_bringup.py::test_connect_timeout_bounds_the_whole_bring_up", ("timing",)),
    ("test_bringup.py::test_initialize_goes_out_beside_an_unanswered_probe", ("timing",)),
    ("test_bringup.py::test_the_sse_fallback_shares_the_connect_deadline", ("timing",)),
    ("test_call_bound.py::test_http_call_timeout_bounds_the_write_and_the_reply", ("timing",)),
    (
        "test_call_bound.py::test_requests_path_call_timeout_bounds_the_write_and_the_reply",
        ("timing",),
    ),
    (
        "test_call_bound.py::test_legacy_sse_call_timeout_counts_the_encoding_of_the_request",
        ("timing",),
    ),
    (
        "test_call_bound.py::test_stdio_call_timeout_bounds_a_trickled_reply",
        ("real_server", "timing"),
    ),
    (
        "test_call_bound.py::test_stdio_call_timeout_counts_the_encoding_of_the_request",
        ("real_server", "timing"),
    ),
    (
        "test_call_bound.py::test_stdio_call_timeout_bounds_a_write_the_server_does_not_read",
        ("real_server", "timing"),
    ),
    ("test_cancel_never_blocks.py", ("timing",)),
    ("test_cli.py", ("real_server",)),
    ("test_cli.py::test_ctrl_c_cancels_call_and_exits_130", ("timing",)),
    ("test_coldstart.py", ("real_server",)),
    ("test_coldstart.py::test_fork_during_prefetch*", ("fork",)),
    ("test_conformance.py", ("real_server",)),
    ("test_connect_bound.py", ("real_server",)),
    ("test_connect_bound.py::test_a_host_entry_connect_timeout_bounds_its_bring_up", ("timing",)),
    (
        "test_connect_bound.py::test_a_script_exiting_right_after_the_error_leaves_no_server",
        ("timing",),
    ),
    ("test_connect_bound.py::test_a_server_answering_the_probe_but_never_initialize", ("timing",)),
    ("test_connect_bound.py::test_a_silent_stdio_server_fails_within_the_bound", ("timing",)),
    ("test_connect_bound.py::test_an_http_server_that_accepts_and_never_replies", ("timing",)),
    ("test_connect_bound.py::test_the_cli_connect_timeout_bounds_the_bring_up", ("timing",)),
    ("test_connect_bound.py::test_a_script_exits_at_once_after_the_error", ("timing",)),
    ("test_connect_bound.py::test_the_cli_exits_at_once_after_its_connect_error", ("timing",)),
    ("test_connect_bound.py::test_the_cli_connect_timeout_counts_its_own_imports", ("timing",)),
    (
        "test_connect_bound.py::test_the_legacy_era_forced_and_a_server_that_never_answers_initialize",
        ("timing",),
    ),
    ("test_ctrl_c_storm.py", ("real_server", "stress")),
    ("test_ctrl_c_storm.py::test_ctrl_c_storm_loses_nothing_and_wedges_nothing", ("timing",)),
    ("test_demo_http.py::test_detach_prints_the_pid_and_kill_stops_it", ("real_server",)),
    ("test_demo_server.py", ("real_server",)),
    ("test_demo_server.py::test_eof_on_stdin_exits_promptly", ("timing",)),
    ("test_display.py::test_in_a_real_notebook_kernel", ("real_server",)),
    ("test_display.py::test_real_session_renders", ("real_server",)),
    (
        "test_dpop_speed.py::test_a_proof_signed_ahead_is_taken_once_by_the_matching_request",
        ("timing",),
    ),
    ("test_doc_examples.py", ("real_server",)),
    ("test_docs_browser.py", ("browser", "real_server")),
    ("test_elicitation.py::test_notebook_form_against_server_everything", ("real_server",)),
    ("test_elicitation.py::test_terminal_form_against_server_everything", ("real_server",)),
    ("test_elicitation.py::test_terminal_form_is_not_sent_without_a_yes", ("real_server",)),
    ("test_elicitation.py::test_terminal_url_elicitation_opens_only_when_asked", ("real_server",)),
    (
        "test_elicitation.py::test_url_required_error_is_typed_and_retried_after_the_person_finishes",
        ("real_server",),
    ),
    ("test_expiry_bound.py", ("real_server", "timing")),
    ("test_fetch_bounds.py::test_a_trickled_head_is_cut_with_pinned_tls_settings", ("timing",)),
    ("test_fetch_bounds.py::test_as_metadata_candidates_share_one_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_as_metadata_slow_same_origin_redirects_count", ("timing",)),
    ("test_fetch_bounds.py::test_auth_replies_trickled_deep_and_fine", ("timing",)),
    ("test_fetch_bounds.py::test_card_endless_redirect_chain_is_refused", ("timing",)),
    ("test_fetch_bounds.py::test_card_huge_body_is_cut_at_the_cap", ("timing",)),
    ("test_fetch_bounds.py::test_card_places_share_one_deadline", ("timing",)),
    (
        "test_fetch_bounds.py::test_card_slow_redirect_chain_counts_against_the_deadline",
        ("timing",),
    ),
    ("test_fetch_bounds.py::test_card_trickled_body_is_cut_at_the_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_card_trickled_head_is_cut_at_the_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_catalog_entries_share_one_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_every_auth_fetch_is_bounded_through_connect", ("timing",)),
    ("test_fetch_bounds.py::test_headless_redirect_hops_share_one_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_headless_redirect_reads_no_page", ("timing",)),
    ("test_fetch_bounds.py::test_icon_fetch_is_bounded", ("timing",)),
    ("test_fetch_bounds.py::test_metadata_huge_body_is_an_auth_error", ("timing",)),
    ("test_fetch_bounds.py::test_prm_trickled_is_cut_at_the_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_registration_reply_trickled_is_cut_at_the_deadline", ("timing",)),
    ("test_fetch_bounds.py::test_token_reply_is_bounded_through_connect", ("timing",)),
    ("test_filters.py::test_annotation_filters_on_server_everything", ("real_server",)),
    ("test_filters.py::test_cli_flags", ("real_server",)),
    ("test_filters.py::test_host_filters_per_server_from_entries_and_arguments", ("real_server",)),
    ("test_filters.py::test_session_filters_on_the_sdk_server_modern_era", ("real_server",)),
    (
        "test_foreign_state.py::test_a_first_session_writes_nothing_and_leaves_foreign_state_alone",
        ("real_server",),
    ),
    ("test_public_api.py", ("real_server",)),
    ("test_stdio_parts.py::test_the_child_alone_runs_*", ("real_server",)),
    ("test_fork.py", ("fork", "real_server")),
    (
        "test_fork.py::test_child_holding_its_copies_does_not_keep_the_server_from_seeing_eof",
        ("timing",),
    ),
    ("test_fork_logging.py", ("fork", "real_server")),
    ("test_future_bounds.py", ("real_server", "timing")),
    ("test_fuzz_sse.py", ("slow",)),
    ("test_fuzz_stdio.py", ("slow",)),
    ("test_host.py::test_a_server_that_dies_turns_failed_and_reconnects", ("real_server",)),
    ("test_host.py::test_close_stops_a_server_that_is_still_starting", ("real_server", "timing")),
    ("test_host.py::test_ctrl_c_during_start_closes_everything", ("real_server",)),
    ("test_host.py::test_host_follows_tools_list_changed", ("real_server",)),
    ("test_host.py::test_host_real_servers_namespace_and_cleanup", ("real_server",)),
    ("test_http_close_inflight.py", ("real_server",)),
    (
        "test_http_cookies.py::test_a_session_behind_a_sticky_balancer_keeps_the_fast_path_and_close_cuts_its_calls",
        ("real_server", "timing"),
    ),
    ("test_http_expiry.py", ("real_server",)),
    (
        "test_http_expiry.py::test_waiting_for_a_reinitialization_is_bounded_and_close_ends_it",
        ("timing",),
    ),
    ("test_http_expiry_twice.py", ("real_server",)),
    (
        "test_http_hostile.py::test_deep_sse_event_is_a_protocol_error_and_the_reply_behind_it_arrives",
        ("timing",),
    ),
    (
        "test_http_hostile.py::test_legacy_reply_over_a_lowered_size_limit_fails_its_call_at_once",
        ("timing",),
    ),
    (
        "test_http_hostile.py::test_reply_over_a_lowered_size_limit_fails_its_call_at_once",
        ("timing",),
    ),
    ("test_http_restart_pool.py", ("real_server",)),
    ("test_http_transport.py", ("real_server",)),
    ("test_http_transport.py::test_close_stops_a_blocked_reader_promptly", ("timing",)),
    ("test_http_transport.py::test_connection_refused_dns_and_timeouts", ("timing",)),
    (
        "test_http_transport.py::test_keep_alive_only_stream_ends_by_the_request_timeout",
        ("timing",),
    ),
    ("test_http_transport.py::test_official_sdk_server_killed_mid_stream", ("timing",)),
    ("test_http_transport.py::test_sse_parser_large_event_linear_and_cap", ("timing",)),
    ("test_http_transport.py::test_sse_retry_resumes_with_get_and_last_event_id", ("timing",)),
    ("test_icons.py", ("real_server",)),
    ("test_layering.py::test_lint_imports_finds_a_cycle_it_is_shown", ("real",)),
    (
        "test_legacy_sse_oversize.py::test_everything_server_big_reply_with_its_id_last",
        ("real_server",),
    ),
    (
        "test_legacy_sse_oversize.py::test_official_sdk_server_big_reply_with_its_id_first",
        ("real_server",),
    ),
    ("test_legacy_sse_transport.py::test_everything_server_raw", ("real_server",)),
    ("test_legacy_sse_transport.py::test_no_endpoint_event_within_connect_timeout", ("timing",)),
    ("test_legacy_sse_transport.py::test_official_sdk_server_killed", ("real_server",)),
    ("test_legacy_sse_transport.py::test_official_sdk_server_raw", ("real_server",)),
    (
        "test_legacy_sse_transport.py::test_session_call_times_out_on_a_keep_alive_only_stream",
        ("timing",),
    ),
    ("test_legacy_sse_transport.py::test_session_over_real_legacy_servers", ("real_server",)),
    ("test_many_threads.py", ("real_server", "stress")),
    ("test_modern_http.py", ("real_server",)),
    ("test_modern_rounds_bound.py", ("timing",)),
    ("test_modern_stdio.py", ("real_server",)),
    ("test_names.py", ("real_server",)),
    ("test_notebooks.py", ("real_server",)),
    (
        "test_notebooks.py::test_interrupting_the_kernel_cancels_the_call_and_keeps_the_session",
        ("timing",),
    ),
    ("test_on_closed.py", ("real_server",)),
    ("test_ordering.py", ("real_server",)),
    ("test_orphans.py", ("real_server",)),
    ("test_orphans.py::test_interpreter_exit_is_bounded_with_stubborn_servers", ("timing",)),
    ("test_orphans_tree.py", ("real_server",)),
    ("test_packaging.py", ("real_server",)),
    ("test_paging_hostile.py::test_http_repeated_cursor_and_slow_pages", ("timing",)),
    ("test_paging_hostile.py::test_repeated_cursor_with_empty_pages_ends_every_list", ("timing",)),
    (
        "test_paging_hostile.py::test_skills_listing_is_bounded_by_one_deadline_and_ends_at_a_repeated_cursor",
        ("timing",),
    ),
    (
        "test_paging_hostile.py::test_slow_pages_are_bounded_by_one_deadline_for_the_whole_list",
        ("timing",),
    ),
    (
        "test_paging_hostile.py::test_stdio_cycle_and_ever_new_cursors_end_the_list",
        ("real_server",),
    ),
    ("test_paging_hostile.py::test_stdio_repeated_cursor_ends_every_list", ("real_server",)),
    (
        "test_paging_hostile.py::test_stdio_slow_pages_are_bounded_by_the_list_timeout",
        ("real_server", "timing"),
    ),
    (
        "test_paging_hostile.py::test_the_session_timeout_bounds_a_list_called_without_one",
        ("timing",),
    ),
    (
        "test_park.py::test_callers_parked_when_the_server_dies_all_fail_and_leave_no_slot",
        ("real_server",),
    ),
    (
        "test_park.py::test_many_threads_on_one_stdio_session_route_every_reply_and_leave_no_slot",
        ("real_server",),
    ),
    ("test_probe_crash.py", ("real_server",)),
    (
        "test_probe_crash.py::test_a_server_that_logs_the_probe_error_and_serves_on_is_not_restarted",
        ("timing",),
    ),
    ("test_probe_crash.py::test_host_close_stops_the_fresh_process_of_a_restart", ("timing",)),
    (  # asserts the first process is under the probe's patience
        "test_probe_crash.py::test_the_first_process_pays_one_restart_the_second_none",
        ("timing",),
    ),
    ("test_protocol_seam.py::test_close_joins_every_thread_within_one_deadline", ("timing",)),
    ("test_protocol_seam.py::test_connect_imports_what_typed_results_need", ("real_server",)),
    ("test_protocol_seam.py::test_each_host_holds_its_own_caches", ("real_server",)),
    ("test_protocol_seam.py::test_timeout_default_given_explicitly_is_the_sessions", ("timing",)),
    ("test_cassette.py::test_live_*", ("real_server",)),
    ("test_pytest_plugin.py", ("real_server",)),
    ("test_readme.py", ("real_server",)),
    ("test_real_stdio.py", ("real_server",)),
    (
        "test_restart.py::test_a_killed_stdio_server_comes_back_with_subscription_and_log_level",
        ("real_server",),
    ),
    (
        "test_restart.py::test_a_real_server_that_dies_after_each_bring_up_stays_failed",
        ("real_server",),
    ),
    (
        "test_restart.py::test_calls_in_flight_fail_with_server_restarted_and_are_not_resent",
        ("real_server",),
    ),
    (
        "test_restart.py::test_close_racing_a_restart_never_leaves_a_process",
        ("real_server", "timing"),
    ),
    (
        "test_restart.py::test_ctrl_c_during_a_blocking_call_that_waits_for_a_restart_is_bounded",
        ("real_server", "timing"),
    ),
    ("test_restart_fork.py", ("fork", "real_server")),
    ("test_restart_host.py", ("real_server",)),
    ("test_restart_real.py", ("real_server",)),
    ("test_server_loggers.py", ("real_server",)),
    ("test_server_stderr.py", ("real_server",)),
    ("test_servers_smoke.py", ("real_server",)),
    ("test_site.py::test_the_built_site_*", ("real_server",)),
    ("test_smoke.py", ("real_server",)),
    (
        "test_smoke.py::test_a_bring_up_that_ignores_its_bound_ends_as_timeout_not_connecting",
        ("timing",),
    ),
    ("test_smoke.py::test_bad_input_each_entry_fails_with_class_and_reason", ("timing",)),
    ("test_smoke.py::test_process_executor_same_results_and_a_dying_worker", ("stress", "timing")),
    ("test_smoke_auth.py", ("real_server", "timing")),
    ("test_smoke_broken_pool.py", ("stress", "timing")),
    ("test_smoke_dask.py", ("real_server", "stress")),
    ("test_smoke_dask.py::test_dask_100_entries_same_as_local_and_nothing_left", ("timing",)),
    ("test_smoke_dask.py::test_dask_keeps_at_most_parallel_entries_in_flight", ("timing",)),
    ("test_smoke_keyring.py::*dask*", ("stress",)),
    ("test_smoke_keyring.py::test_smoke_keyring_in_threads_reuses_one_token", ("real_server",)),
    (
        "test_smoke_keyring.py::test_smoke_keyring_in_worker_processes_reuses_one_token",
        ("real_server",),
    ),
    (
        "test_smoke_keyring.py::test_smoke_keyring_is_not_opened_when_no_entry_uses_oauth",
        ("real_server",),
    ),
    ("test_stdio.py", ("real_server",)),
    ("test_stdio.py::test_message_over_the_limit_is_discarded_and_reported", ("timing",)),
    ("test_stdio_hostile.py", ("real_server",)),
    (
        "test_stdio_hostile.py::test_a_write_to_a_server_that_stopped_reading_is_bounded",
        ("timing",),
    ),
    ("test_stdio_hostile.py::test_an_oversize_reply_fails_its_call_at_once", ("timing",)),
    ("test_stdio_hostile.py::test_server_stderr_is_logged_under_the_servers_logger", ("timing",)),
    ("test_stdio_writes.py", ("real_server",)),
    ("test_submit_everywhere.py", ("real_server",)),
    (
        "test_submit_everywhere.py::test_a_future_made_during_a_restart_keeps_its_timeout",
        ("timing",),
    ),
    ("test_submit_everywhere.py::test_a_future_made_during_a_restart_returns_at_once", ("timing",)),
    ("test_submit_everywhere.py::test_cancel_tells_the_server", ("timing",)),
    (
        "test_submit_everywhere.py::test_legacy_sse_submit_does_not_wait_for_the_posts_answer",
        ("timing",),
    ),
    ("test_submit_everywhere.py::test_submits_return_at_once_and_overlap", ("timing",)),
    ("test_tasks_restart.py", ("real_server",)),
    ("test_tasks_start.py", ("real_server",)),
    (
        "test_tasks_start.py::test_ctrl_c_while_a_task_is_created_over_http_still_cancels_the_task",
        ("timing",),
    ),
    (
        "test_testing_serve.py::test_a_server_that_never_starts_is_bounded_by_connect_timeout",
        ("timing",),
    ),
    ("test_threads_budget.py", ("real_server",)),
    ("test_tiers.py::*_subprocess", ("real_server",)),
    ("test_timeouts_audit.py", ("real_server", "timing")),
    ("test_timeouts_audit_more.py", ("real_server",)),
    (
        "test_timeouts_audit_more.py::test_a_task_calls_timeout_ends_its_wait_task_id_too",
        ("timing",),
    ),
    (
        "test_timeouts_audit_more.py::test_app_bridge_call_timeout_bounds_a_call_the_app_makes",
        ("timing",),
    ),
    ("test_timeouts_audit_more.py::test_close_ends_a_restart_backoff_at_once", ("timing",)),
    ("test_timeouts_audit_more.py::test_legacy_sse_read_timeout_ends_an_idle_stream", ("timing",)),
    (
        "test_timeouts_audit_more.py::test_modern_future_result_timeout_bounds_only_that_wait",
        ("timing",),
    ),
    (
        "test_timeouts_audit_more.py::test_task_future_wait_task_id_timeout_bounds_only_that_wait",
        ("timing",),
    ),
    ("test_token_store_shared.py::test_8_threads_x_4_processes*", ("stress",)),
    (
        "test_token_store_shared.py::test_a_lock_held_by_another_process_is_waited_for_within_the_bound",
        ("real_server", "timing"),
    ),
    (
        "test_token_store_shared.py::test_a_lock_held_by_another_thread_is_waited_for_within_the_bound",
        ("timing",),
    ),
    ("test_token_store_shared.py::test_dask_workers_in_2_processes*", ("stress",)),
    (
        "test_token_store_shared.py::test_the_keyring_store_lock_wait_is_bounded_and_names_its_lock_file",
        ("timing",),
    ),
    (
        "test_transport_contract.py::test_stdio_kill_ends_the_child_and_its_group_at_once",
        ("real_server",),
    ),
    (
        "test_windows_paths.py::test_windows_module_does_not_import_ctypes_until_a_job_is_made",
        ("real_server",),
    ),
)


def markers_for(
    path: str, name: str, rules: Iterable[tuple[str, tuple[str, ...]]] = RULES
) -> set[str]:
    """The markers the table gives the test ``name`` (without ``[params]``) of file ``path``
    (its file name, e.g. ``test_cli.py``; folders are ignored)."""
    base = name.split("[", 1)[0]
    found: set[str] = set()
    for rule, markers in rules:
        file_part, _, name_part = rule.partition("::")
        if not fnmatch.fnmatchcase(path, file_part):
            continue
        if name_part and not fnmatch.fnmatchcase(base, name_part):
            continue
        found.update(markers)
    return found


def unmatched(files: Iterable[str], names: dict[str, set[str]], rules=RULES) -> list[str]:
    """Rules that match no collected test (a renamed file or test leaves a stale rule)."""
    stale = []
    for rule, _ in rules:
        file_part, _, name_part = rule.partition("::")
        hit = any(
            fnmatch.fnmatchcase(f, file_part)
            and (not name_part or any(fnmatch.fnmatchcase(n, name_part) for n in names.get(f, ())))
            for f in files
        )
        if not hit:
            stale.append(rule)
    return stale
