"""Smoke tests for the benchmark harness (no timing assertions): the HTTP peer answers like a
stateless Streamable HTTP endpoint, and every worker reports a complete result.

Not collected by the default test run (``testpaths = tests``); run them explicitly::

    .venv/bin/python -m pytest benchmarks/test_bench_smoke.py
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench  # noqa: E402

TINY = {
    "bringup_n": 1,
    "warmup": 2,
    "seq_seconds": 0.05,
    "seq_max": 20,
    "threads": 3,
    "thread_seconds": 0.05,
    "big": [[1000, 1], [200_000, 1]],
}


@pytest.fixture(scope="module")
def http_url():
    proc, url = bench._start_http_server("stdlib")
    try:
        yield url
    finally:
        bench._stop(proc)


def _post(conn, path, payload):
    conn.request("POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.getheader("Content-Type"), response.read()


def test_http_peer_speaks_stateless_json(http_url):
    parts = urllib.parse.urlsplit(http_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        status, ctype, body = _post(
            conn,
            parts.path,
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": bench.INIT_PARAMS},
        )
        assert status == 200 and ctype == "application/json"
        assert json.loads(body)["result"]["protocolVersion"] == bench.LATEST_VERSION
        status, _, body = _post(
            conn, parts.path, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert (status, body) == (202, b"")
        call = {"name": "big", "arguments": {"size_bytes": 123_457}}
        status, _, body = _post(
            conn, parts.path, {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": call}
        )
        reply = json.loads(body)
        assert reply["id"] == "b" and len(reply["result"]["content"][0]["text"]) == 123_457
        status, _, body = _post(conn, parts.path, {"jsonrpc": "2.0", "id": 3, "method": "nope"})
        assert json.loads(body)["error"]["code"] == -32601
        conn.request("GET", parts.path)
        response = conn.getresponse()
        response.read()
        assert response.status == 405
    finally:
        conn.close()


def _check(result):
    assert "error" not in result, result
    assert result["seq"]["n"] > 0 and result["threads"]["n"] > 0
    assert set(result["big_s"]) == {"1000", "200000"}
    assert result["rss_mb"]["peak"] >= result["rss_mb"]["start"] > 0


@pytest.mark.parametrize("client", ["mcpsync", "bare", pytest.param("sdk", marks=pytest.mark.real)])
def test_stdio_worker_reports_everything(client):
    conf = {**TINY, "client": client, "transport": "stdio", "server_argv": bench.DEMO_ARGV}
    _check(bench.run_worker(conf, timeout=60))


@pytest.mark.parametrize("client", ["mcpsync", "bare", pytest.param("sdk", marks=pytest.mark.real)])
def test_http_worker_reports_everything(client, http_url):
    conf = {**TINY, "client": client, "transport": "http", "url": http_url}
    _check(bench.run_worker(conf, timeout=60))


def test_summary_and_table_survive_a_failed_client():
    good = bench.run_worker(
        {**TINY, "client": "bare", "transport": "stdio", "server_argv": bench.DEMO_ARGV}, 60
    )
    rounds = [{"mcpsync": {"error": "boom"}, "bare": good, "sdk": {"error": "timed out"}}]
    summary = bench.summarize(rounds, [1000, 200_000])
    assert summary["mcpsync"] == {"error": "boom"}
    assert summary["bare"]["seq_rate"] > 0
    table = bench.render("t", summary, bench.STDIO_TARGETS, rounds)
    assert "!! mcpsync: boom" in table and "sequential echo" in table
