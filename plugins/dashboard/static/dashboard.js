// townsquare dashboard: live updates and the interview box. No libraries, nothing fetched
// from anywhere but this server.
(function () {
  "use strict";
  const body = document.body;
  const pollMs = parseInt(body.dataset.pollMs || "1500", 10);
  let version = body.dataset.version;
  let busy = false;

  function fragmentUrl() {
    const url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  async function refresh() {
    const response = await fetch(fragmentUrl(), { cache: "no-store" });
    if (!response.ok) return;
    const data = await response.json();
    // keep the reader's place: open <details> stay open across an update
    const open = Array.from(document.querySelectorAll("#content details[open] summary")).map((s) => s.textContent);
    document.getElementById("runbar").innerHTML = data.runbar;
    document.getElementById("content").innerHTML = data.content;
    document.querySelectorAll("#content details summary").forEach((s) => {
      if (open.includes(s.textContent)) s.parentElement.open = true;
    });
    version = data.version;
    body.dataset.version = version;
    body.dataset.updated = String(Date.now());
  }

  async function poll() {
    if (busy) return;
    busy = true;
    try {
      const response = await fetch("/api/version", { cache: "no-store" });
      if (response.ok) {
        const data = await response.json();
        if (data.version !== version) await refresh();
      }
      body.classList.remove("offline");
    } catch (err) {
      body.classList.add("offline"); // the server stopped: keep the page, try again
    } finally {
      busy = false;
    }
  }
  setInterval(poll, pollMs);

  const form = document.getElementById("interview");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = form.querySelector("input[name=question]");
      const button = form.querySelector("button");
      const out = document.getElementById("answer");
      const question = input.value.trim();
      if (!question) return;
      button.disabled = true;
      out.className = "waiting";
      out.textContent = "asking…";
      try {
        const response = await fetch("/api/interview", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ agent: form.dataset.agent, question: question }),
        });
        const data = await response.json();
        out.className = response.ok ? "answer" : "error";
        out.textContent = response.ok ? data.answer : data.error;
        if (response.ok) {
          const who = document.createElement("div");
          who.className = "when";
          who.textContent = "round " + data.round + " · " + data.model + " · " + question;
          out.prepend(who);
        }
      } catch (err) {
        out.className = "error";
        out.textContent = "the dashboard server did not answer: " + err;
      } finally {
        button.disabled = false;
      }
    });
  }
})();
