"""The stdio transport and the session over it: the bundled demo server, faults, cleanup."""

from __future__ import annotations

import os
import sys
import threading
import time

import psutil
import pytest
from servers.launch import demo_argv, faulty_argv

import mcpsync
from mcpsync.errors import ConfigError, ServerExited
from mcpsync.transports.stdio import StdioTransport, default_environment


def test_full_api_against_the_demo_server(no_leaks):
    answers = {"roots": ["file:///work"]}
    with mcpsync.Session.connect(
        demo_argv("--page-size", "3"),
        sampling_handler=lambda p: {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled"},
            "model": "m",
        },
        elicitation_handler=lambda p: {"action": "accept", "content": {"name": "Ann"}},
        roots=lambda: answers["roots"],
    ) as s:
        assert s.protocol_version == "2025-11-25"
        names = [t.name for t in s.list_tools()]  # several pages of 3
        assert {"echo", "add", "long_running", "sample", "elicit", "touch_resource"} <= set(names)
        assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
        added = s.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        assert s.call_tool("fail", {}).is_error
        assert s.call_tool("sample", {"prompt": "p"}).content[0].text == "sampled"
        assert "Ann" in s.call_tool("elicit", {"message": "name?"}).content[0].text
        assert "file:///work" in s.call_tool("list_roots", {}).content[0].text
        resources = s.list_resources()
        assert s.read_resource(resources[0].uri).contents
        assert s.list_resource_templates()[0].uri_template.startswith("demo://item/")
        assert s.get_prompt("greet", {"name": "Bo"}).messages
        assert (
            "Ada"
            in s.complete({"type": "ref/prompt", "name": "greet"}, "name", "A").completion.values
        )
        s.set_logging_level("debug")
        s.ping()


def test_progress_and_concurrent_futures(no_leaks):
    with mcpsync.Session.connect(demo_argv()) as s:
        seen = []
        result = s.call_tool("long_running", {"duration": 0.3, "steps": 3}, on_progress=seen.append)
        assert "3 steps" in result.content[0].text
        assert [p.progress for p in seen] == [1, 2, 3]
        futures = [s.submit_call_tool("echo", {"message": str(i)}) for i in range(50)]
        assert [f.result(timeout=10).content[0].text for f in futures] == [
            str(i) for i in range(50)
        ]


def test_threads_share_one_session(no_leaks):
    with mcpsync.Session.connect(demo_argv()) as s:
        errors = []

        def work(k):
            try:
                for i in range(100):
                    assert (
                        s.call_tool("echo", {"message": f"{k}-{i}"}).content[0].text == f"{k}-{i}"
                    )
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors


def test_threads_mixing_every_kind_of_call_all_finish(no_leaks):
    # Blocking calls, futures, cancellations, timeouts and progress calls from 8 threads on one
    # session: the reader role changes hands constantly; every call must end, none twice.
    with mcpsync.Session.connect(demo_argv()) as s:
        errors, done = [], []

        def work(k):
            try:
                for i in range(40):
                    kind = (k + i) % 4
                    if kind == 0:
                        text = s.call_tool("echo", {"message": f"{k}-{i}"}).content[0].text
                        assert text == f"{k}-{i}"
                    elif kind == 1:
                        future = s.submit_call_tool("long_running", {"duration": 5, "steps": 5})
                        future.cancel()
                        assert future.cancelled()
                    elif kind == 2:
                        with pytest.raises(mcpsync.RequestTimeout):
                            s.call_tool("long_running", {"duration": 5, "steps": 5}, timeout=0.05)
                    else:
                        seen = []
                        result = s.call_tool(
                            "long_running", {"duration": 0.02, "steps": 2}, on_progress=seen.append
                        )
                        assert "2 steps" in result.content[0].text and len(seen) == 2
                    done.append(1)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(done) == 8 * 40
        assert not any(t.is_alive() for t in threads)
        assert not s.connection._pending
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


def test_subscription_and_list_changed_callbacks(no_leaks):
    with mcpsync.Session.connect(demo_argv()) as s:
        updated, changed = threading.Event(), threading.Event()
        uri = str(s.list_resources()[0].uri)
        s.subscribe_resource(uri, lambda u: updated.set())
        s.on_tools_changed(changed.set)
        s.call_tool("touch_resource", {"uri": uri})
        assert updated.wait(5)
        s.call_tool("add_tool", {"name": "fresh"})
        assert changed.wait(5)
        assert "fresh" in [t.name for t in s.list_tools()]
        s.unsubscribe_resource(uri)


def test_cancelling_a_long_call_leaves_the_session_usable(no_leaks):
    with mcpsync.Session.connect(demo_argv()) as s:
        future = s.submit_call_tool("long_running", {"duration": 30, "steps": 30})
        assert future.cancel()
        with pytest.raises(mcpsync.RequestTimeout):
            s.call_tool("long_running", {"duration": 30, "steps": 30}, timeout=0.5)
        assert s.call_tool("echo", {"message": "still here"}).content[0].text == "still here"


def test_crash_mid_call_fails_pending_calls_with_exit_code_and_stderr(no_leaks):
    with mcpsync.Session.connect(faulty_argv("--crash-on-call", "echo")) as s:
        slow = s.submit_call_tool("long_running", {"duration": 30, "steps": 30})
        with pytest.raises(ServerExited) as info:
            s.call_tool("echo", {"message": "boom"}, timeout=30)
        assert info.value.exit_code == 3
        assert "crashing on purpose" in info.value.stderr_tail
        with pytest.raises(ServerExited):
            slow.result(timeout=5)
        with pytest.raises(mcpsync.MCPSyncError):
            s.ping()


def test_exit_before_initialize_is_a_clear_error(no_leaks):
    with pytest.raises(ServerExited) as info:
        mcpsync.Session.connect(faulty_argv("--exit-before-init"), connect_timeout=10)
    assert info.value.exit_code == 1
    assert "before initialize" in str(info.value)


def test_garbage_on_stdout_is_reported_and_reading_goes_on(no_leaks):
    with mcpsync.Session.connect(faulty_argv("--garbage-stdout")) as s:
        assert s.call_tool("echo", {"message": "ok"}).content[0].text == "ok"
        assert any("not JSON" in str(e) for e in s.connection.protocol_errors)


def test_stderr_flood_never_blocks_the_server(no_leaks):
    with mcpsync.Session.connect(faulty_argv("--stderr-flood", "40"), connect_timeout=60) as s:
        assert s.call_tool("echo", {"message": "ok"}).content[0].text == "ok"
        assert "E" * 100 in s.transport.stderr_tail()


def test_fifty_megabyte_message(no_leaks):
    with mcpsync.Session.connect(faulty_argv("--huge-message", "50")) as s:
        result = s.call_tool("huge", {}, timeout=60)
        assert len(result.content[0].text) == 50 * 1024 * 1024


def test_message_over_the_limit_is_discarded_and_reported(no_leaks):
    transport = StdioTransport(faulty_argv("--huge-message", "2"), max_message_bytes=1024 * 1024)
    with mcpsync.Session.connect(transport, timeout=5) as s:
        # The call fails at once with the size error (not after its own 30 s timeout).
        started = time.monotonic()
        with pytest.raises(mcpsync.ProtocolError, match="over 1048576 bytes"):
            s.call_tool("huge", {}, timeout=30)
        assert time.monotonic() - started < 10
        assert any("over 1048576 bytes" in str(e) for e in s.connection.protocol_errors)
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


def test_server_that_never_answers_times_out_at_connect(no_leaks):
    with pytest.raises(mcpsync.RequestTimeout):
        mcpsync.Session.connect(faulty_argv("--never-answer"), connect_timeout=1)


def test_close_ends_the_server_and_its_children(tmp_path, no_leaks):
    # A server that starts a grandchild and ignores stdin EOF and SIGTERM: the ladder must reach SIGKILL.
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(child.pid, file=sys.stderr, flush=True)\n"
        "import mcpsync.demo_server as d\n"
        "sys.exit(d.main([]))\n"
    )
    transport = StdioTransport(
        [sys.executable, str(script)], shutdown_timeout=0.5, inherit_env=True
    )
    s = mcpsync.Session.connect(transport)
    grandchild = int(transport.stderr_tail().splitlines()[0])
    assert psutil.pid_exists(grandchild)
    s.close()
    assert transport.process.poll() is not None
    try:
        gone, alive = psutil.wait_procs([psutil.Process(grandchild)], timeout=5)
    except psutil.NoSuchProcess:
        return
    assert not alive or alive[0].status() == psutil.STATUS_ZOMBIE


def test_environment_is_an_allow_list_plus_the_entry(monkeypatch, no_leaks):
    monkeypatch.setenv("MCPSYNC_SECRET_TOKEN", "s3cret")
    assert "MCPSYNC_SECRET_TOKEN" not in default_environment()
    transport = StdioTransport(demo_argv(), env={"EXTRA": "1"})
    assert transport.env["EXTRA"] == "1" and "MCPSYNC_SECRET_TOKEN" not in transport.env
    assert transport.env["PATH"] == os.environ["PATH"]


def test_a_shell_string_is_refused():
    with pytest.raises(ConfigError):
        StdioTransport("python -m server")  # type: ignore[arg-type]


def test_missing_command_is_a_transport_error(no_leaks):
    with pytest.raises(mcpsync.TransportError, match="cannot start"):
        mcpsync.Session.connect(["/nonexistent/server-binary"])


def test_works_where_sys_stderr_has_no_file_descriptor(monkeypatch, no_leaks):
    import io

    monkeypatch.setattr(sys, "stderr", io.StringIO())  # as in Jupyter: no fileno()
    with mcpsync.Session.connect(demo_argv()) as s:
        assert s.call_tool("echo", {"message": "nb"}).content[0].text == "nb"


def test_calls_with_progress_callbacks_do_not_stall(no_leaks):
    # Such replies are resolved on the dispatch thread; the caller reading stdout must be woken.
    with mcpsync.Session.connect(demo_argv()) as s:
        done = threading.Event()

        def thirty_calls():
            for _ in range(30):
                s.call_tool("echo", {"message": "x"}, on_progress=lambda p: None)
            done.set()

        worker = threading.Thread(target=thirty_calls)
        worker.start()
        assert done.wait(10), "30 calls with on_progress took over 10 s (a stall of ~1 s each)"
        worker.join()


def test_a_closed_transport_cannot_be_started(no_leaks):
    transport = StdioTransport(demo_argv())
    transport.close()
    with pytest.raises(mcpsync.TransportError):
        transport.start(lambda m: None, lambda e: None)
    assert transport.process is None


def test_ctrl_c_while_reading_stdout_cancels_the_call(no_leaks):
    # The blocking path: the caller holds the reader role (it polls stdout) when Ctrl-C lands.
    import signal

    with mcpsync.Session.connect(demo_argv()) as s:
        sent = []
        send = s.transport.send
        s.transport.send = lambda message, **kw: (sent.append(message), send(message, **kw))[1]
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                s.call_tool("long_running", {"duration": 30, "steps": 30}, timeout=60)
        finally:
            timer.join()
        call = next(m for m in sent if m.get("method") == "tools/call")
        cancelled = [m for m in sent if m.get("method") == "notifications/cancelled"]
        assert [m["params"]["requestId"] for m in cancelled] == [call["id"]]
        assert not s.connection._pending  # nothing left waiting
        assert s.call_tool("echo", {"message": "still here"}).content[0].text == "still here"
