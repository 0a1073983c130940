// privmarket console: sign-in, the /v1 client and DOM helpers shared by every page.
// Every value from the API enters the page through textContent or setAttribute (never
// parsed as HTML), so a market or seller name is always shown as text.
"use strict";

const PM = (window.PM = { pages: {} });
const STORE = window.sessionStorage;
const KEY = "privmarket.key";

PM.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};

PM.byId = (id) => document.getElementById(id);

PM.fmt = function (value, digits = 4) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  if (value !== 0 && (Math.abs(value) >= 1e6 || Math.abs(value) < 1e-3)) {
    return value.toExponential(2);
  }
  return String(Number(value.toPrecision(digits)));
};

PM.money = (value) => (value === null || value === undefined ? "—" : Number(value).toFixed(2));

PM.fillTable = function (table, rows, empty) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const cells of rows) {
    body.append(PM.el("tr", {}, cells.map((c) => PM.el("td", {}, c))));
  }
  if (!rows.length) {
    const span = table.tHead.rows[0].cells.length;
    body.append(PM.el("tr", {}, PM.el("td", { colspan: span, class: "empty" }, empty)));
  }
};

PM.dl = function (dl, pairs) {
  dl.replaceChildren();
  for (const [term, value] of pairs) {
    dl.append(PM.el("dt", {}, term), PM.el("dd", {}, value));
  }
};

PM.link = (href, text) => PM.el("a", { href }, text);

// Messages -------------------------------------------------------------------------

PM.say = function (text, kind = "error") {
  const box = PM.byId("message");
  box.className = kind;
  box.textContent = text;
  box.hidden = false;
};

PM.clearMessage = function () {
  PM.byId("message").hidden = true;
};

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}
PM.ApiError = ApiError;

function detailText(body, status) {
  const detail = body && body.detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".")}: ${d.msg}`)
      .join("; ");
  }
  return detail ? String(detail) : `HTTP ${status}`;
}

// The /v1 client: the key goes in the Authorization header only.
PM.api = async function (path, { method = "GET", body, key } = {}) {
  const headers = { Accept: "application/json" };
  const token = key || STORE.getItem(KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  } catch (err) {
    throw new ApiError(0, `the service did not answer (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (err) {
    data = null;
  }
  if (!response.ok) throw new ApiError(response.status, detailText(data, response.status));
  return data;
};

// A binary download (e.g. the ONNX model): the response body as a Blob.
PM.apiBlob = async function (path) {
  const headers = { Accept: "application/octet-stream, application/json" };
  const token = STORE.getItem(KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, { headers, credentials: "omit", cache: "no-store" });
  } catch (err) {
    throw new ApiError(0, `the service did not answer (${err.message})`);
  }
  if (!response.ok) {
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    throw new ApiError(response.status, detailText(data, response.status));
  }
  return response.blob();
};

// What a failed call means to the person looking at the page.
PM.explain = function (err, what) {
  if (!(err instanceof ApiError)) return `${what}: ${err.message}`;
  if (err.status === 401) return "Your API key was not accepted (401): sign in again with a valid key.";
  if (err.status === 403) return `You may not see ${what} with this key (403: ${err.message}).`;
  if (err.status === 404) return `Not found: ${what} does not exist or is not yours (404).`;
  if (err.status === 429) return `Too many requests; wait a moment and reload (${err.message}).`;
  return `Could not load ${what} (${err.status || "network"}): ${err.message}`;
};

// A page's main read: a failure is explained in terms of `what` (see boot()).
PM.load = async function (path, what) {
  try {
    return await PM.api(path);
  } catch (err) {
    err.what = what;
    throw err;
  }
};

PM.poll = async function (fetchOnce, isDone, { interval = 400 } = {}) {
  for (;;) {
    const value = await fetchOnce();
    if (isDone(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
};

// Sign-in and navigation ------------------------------------------------------------

const NAV = {
  admin: [["/console/markets", "Markets"], ["/docs", "API docs"]],
  buyer: [["/console/buy", "Order a model"], ["/console/markets", "Markets"], ["/docs", "API docs"]],
  seller: [["/console/seller", "Your data"], ["/console/markets", "Markets"], ["/docs", "API docs"]],
};
const ROLE_NAMES = { admin: "admins", buyer: "buyers", seller: "sellers" };

PM.article = (word) => (/^[aeiou]/i.test(word) ? `an ${word}` : `a ${word}`);

function showSignIn(text) {
  if (document.body.dataset.page === "home") {
    document.querySelector("main h1").textContent = "Sign in";
    document.title = "Sign in · privmarket console";
  }
  PM.byId("content").hidden = true;
  PM.byId("signin").hidden = false;
  if (text) PM.say(text);
  PM.byId("api-key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = PM.byId("api-key");
  const key = input.value.trim();
  input.value = "";
  PM.clearMessage();
  try {
    const me = await PM.api("/v1/me", { key });
    STORE.setItem(KEY, key);
    STORE.setItem("privmarket.me", JSON.stringify(me));
    window.location.reload();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      PM.say(
        "That API key was not accepted: it is wrong, incomplete or revoked. " +
          "Keys start with pm_ and are shown once when the account is created.",
      );
    } else {
      PM.say(PM.explain(err, "your account"));
    }
  }
}

function signOut() {
  STORE.removeItem(KEY);
  STORE.removeItem("privmarket.me");
  window.location.assign("/console/");
}

function renderNav(me) {
  const nav = PM.byId("nav");
  nav.replaceChildren(...(NAV[me.role] || []).map(([href, text]) => PM.link(href, text)));
  PM.byId("who").textContent = `${me.name} (${me.role} #${me.id})`;
  PM.byId("sign-out").hidden = false;
}

async function boot() {
  PM.byId("signin-form").addEventListener("submit", signIn);
  PM.byId("sign-out").addEventListener("click", signOut);
  if (!STORE.getItem(KEY)) return showSignIn();
  let me;
  try {
    me = await PM.api("/v1/me");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      STORE.removeItem(KEY);
      return showSignIn("Your API key was not accepted (401): sign in again.");
    }
    return PM.say(PM.explain(err, "your account"));
  }
  PM.me = me;
  renderNav(me);
  const body = document.body;
  const roles = body.dataset.roles.split(" ");
  if (!roles.includes(me.role)) {
    const who = roles.map((r) => ROLE_NAMES[r]).join(" and ");
    return PM.say(`This page is for ${who}; you are signed in as ${PM.article(me.role)}.`);
  }
  PM.byId("content").hidden = false;
  const page = PM.pages[body.dataset.page];
  if (!page) return;
  try {
    await page(body.dataset);
  } catch (err) {
    PM.say(PM.explain(err, err.what || "this page's data"));
  }
}

PM.pages.home = async function () {
  const links = NAV[PM.me.role] || [];
  document.querySelector("main h1").textContent = `Welcome, ${PM.me.name}`;
  PM.byId("welcome").textContent = `You are signed in as ${PM.article(PM.me.role)}.`;
  PM.byId("links").replaceChildren(
    ...links.map(([href, text]) => PM.el("li", {}, PM.link(href, text))),
  );
};

document.addEventListener("DOMContentLoaded", boot);
