/**
 * The dashboard's two static files: its style sheet and the few lines of script that keep a page
 * live (served by lib/admin/dashboard.tsx under `/admin/assets/`). They are files, never inline:
 * the pages' Content-Security-Policy allows only `'self'`.
 *
 * @module
 */

/** The dashboard's style sheet, served at `/admin/assets/dashboard.css`. */
export const DASHBOARD_CSS = `
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1f2a44;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;align-items:center}
header a{color:#fff}header form{margin-left:auto}
main{padding:1rem 1.2rem;max-width:72rem}
table{border-collapse:collapse;margin:.5rem 0 1.2rem;background:#fff}
th,td{border:1px solid #d0d4dc;padding:.3rem .6rem;text-align:left;vertical-align:top}
caption{text-align:left;font-weight:600;padding:.3rem 0}
.status{font-weight:600}.Failed{color:#a4000f}.Completed{color:#0a6b2a}.Processing,.Running{color:#8a5300}
a:focus,button:focus,select:focus,input:focus{outline:3px solid #ffbf47;outline-offset:1px}
button{font:inherit;padding:.3rem .8rem}pre{white-space:pre-wrap;background:#fff;border:1px solid #d0d4dc;padding:.5rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;background:#fff;padding:.6rem;border:1px solid #d0d4dc}
dt{font-weight:600}.note{padding:.4rem .6rem;background:#e8f0fe;border:1px solid #9db7f5}
.error{background:#fde8e8;border-color:#e29595}.muted{color:#5c6270}
.actions{display:flex;gap:.8rem;align-items:center;flex-wrap:wrap;margin:.5rem 0}
.paused{color:#8a5300;font-weight:600}`;

// Re-fetch this page on a job event (debounced) and swap each live region by id. The stream is
// the dashboard's own, behind the login cookie: EventSource cannot send a bearer token. On
// `ready` (the subscription exists; also after a reconnect) it refreshes once, so an event that
// fell between rendering this page and subscribing is not missed. A refresh that an earlier one
// overtook is dropped, so a slow answer never puts older content back.
/** The live-update script, served at `/admin/assets/live.js`. */
export const LIVE_JS = `(() => {
  let timer, latest = 0;
  async function refresh() {
    const mine = ++latest;
    const res = await fetch(location.href, { headers: { accept: "text/html" } });
    if (!res.ok || mine !== latest) return;
    const next = new DOMParser().parseFromString(await res.text(), "text/html");
    if (mine !== latest) return;
    for (const region of document.querySelectorAll("[data-live-region]")) {
      const fresh = next.getElementById(region.id);
      if (fresh) region.replaceWith(fresh);
    }
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  }
  const soon = () => { clearTimeout(timer); timer = setTimeout(refresh, 200); };
  const events = new EventSource("/admin/events");
  for (const name of ["claimed", "completed", "failed", "given_back", "recovered", "retried", "cancelled", "reset"]) {
    events.addEventListener(name, soon);
  }
  events.addEventListener("ready", () => { document.body.dataset.live = "ready"; soon(); });
})();`;
