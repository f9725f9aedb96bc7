#!/usr/bin/env python3
"""Opens the checkout example's page in headless Chromium, clicks "Pay" three times in a
row (a triple click), and checks what a person sees: "Paid" with one charge, the button
off. Then reloads the page (a new render, which offers a new key) and pays again: the
page keeps its order's key, so it says "Already paid", the same charge, replayed.
Installs Chromium and ChromeDriver from Debian if they are missing.

    python3 crates/idem-http/scripts/browser_check.py   # from the repository root

Not part of CI (it needs Debian's packages); run it after changing the page or layer.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

ADDR = "127.0.0.1:3177"
DRIVER = "127.0.0.1:9517"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{DRIVER}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["value"]


def wait_for(what, check, limit=30.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"gave up waiting for {what}")


def element(session, css):
    found = call("POST", f"/session/{session}/element", {"using": "css selector", "value": css})
    return list(found.values())[0]


def click(session, css):
    call("POST", f"/session/{session}/element/{element(session, css)}/click", {})


def log_text(session):
    """The page's log of raw answers (inside a closed <details>: read its text content)."""
    script = {"script": "return document.getElementById('log').textContent", "args": []}
    return call("POST", f"/session/{session}/execute/sync", script)


def wait_for_status(session, words, what):
    """The page's status line once it holds `words`."""
    said = {"text": ""}

    def shown():
        status = element(session, "#status")
        said["text"] = call("GET", f"/session/{session}/element/{status}/text")
        return words in said["text"]

    wait_for(what, shown)
    return said["text"]


def wait_for_charges(session, count, what):
    """The page's log once it shows `count` charges."""
    log = {"text": ""}

    def shown():
        log["text"] = call("GET", f"/session/{session}/element/{element(session, '#log')}/text")
        return log["text"].count("ch_") == count

    wait_for(what, shown)
    return log["text"]


def main():
    if not shutil.which("chromedriver"):
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"],
                       check=True)
    env = dict(os.environ, IDEM_HTTP_ADDR=ADDR)
    subprocess.run(["cargo", "build", "-q", "-p", "idem-http", "--example",
                    "checkout_server"], check=True)
    server = subprocess.Popen(["target/debug/examples/checkout_server"], env=env,
                              stdout=subprocess.PIPE, text=True)
    driver = subprocess.Popen(["chromedriver", f"--port={DRIVER.split(':')[1]}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the server", lambda: urllib.request.urlopen(f"http://{ADDR}/", timeout=1))
        wait_for("chromedriver", lambda: call("GET", "/status")["ready"])
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": shutil.which("chromium"), "args": CHROME_FLAGS}}}}
        session = call("POST", "/session", caps)["sessionId"]
        call("POST", f"/session/{session}/url", {"url": f"http://{ADDR}/"})
        for _ in range(3):
            click(session, "#pay")
        paid = wait_for_status(session, "Paid ", "the page to say it was paid")
        disabled = call("GET", f"/session/{session}/element/{element(session, '#pay')}"
                               "/enabled") is False
        first = log_text(session)
        call("POST", f"/session/{session}/refresh", {})
        click(session, "#pay")
        again = wait_for_status(session, "Already paid", "the page to say it was paid already")
        log = {"text": first + "\n" + log_text(session)}
        shot = call("GET", f"/session/{session}/screenshot")
        with open("target/checkout_page.png", "wb") as out:
            import base64
            out.write(base64.b64decode(shot))
        call("DELETE", f"/session/{session}")
        lines = log["text"].strip().splitlines()
        print("\n".join(lines))
        print(f"page said: {paid!r}, then after the reload: {again!r}")
        charges = {line.split('"charge":"')[1].split('"')[0] for line in lines if "ch_" in line}
        assert charges == {"ch_1"}, f"one charge expected, the page shows {charges}"
        assert disabled, "the button is off once paid"
        assert "(replayed)" in lines[-1], "the click after the reload is a replay"
        print("browser check: 3 clicks (the button off while paying), a reload, a click: "
              "1 charge (ch_1), 'Paid', then 'Already paid'; screenshot in "
              "target/checkout_page.png")
    finally:
        driver.terminate()
        server.terminate()


if __name__ == "__main__":
    main()
