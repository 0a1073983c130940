// Forms generated from the API's own OpenAPI document (/openapi.json): one input per
// schema field, so the console's market forms follow the API without a copy of its rules.
// Supported: strings, numbers, booleans, enums, nullable fields (empty = not sent),
// nested objects, lists of objects (add/remove rows), lists of numbers or strings (comma-
// separated), and unions chosen by a discriminator (the cost prior's family).
"use strict";

// Plain-language labels; the technical name is shown as a hint.
const FIELD_LABELS = {
  name: "Name",
  task: "Task",
  features: "Features",
  low: "Lowest value",
  high: "Highest value",
  missable: "May be missing",
  public: "Not sensitive (public)",
  cost_prior: "Public prior of the sellers' costs",
  family: "Family",
  params: "Parameters",
  mechanism: "Mechanism settings",
  gamma: "γ: weight of payments against model quality",
  eps_avg_max: "Largest average ε (L)",
  k: "Weight cap k (weights ≤ k/m)",
  u: "Seller disutility (ε or ε^p)",
  u_power: "Disutility power p",
  lam: "Ridge weight λ",
  mu: "Spread weight μ",
  sigma: "Noise weight σ",
  mode: "Pricing mode",
  grids: "Hyperparameter grids",
  validation: "Public validation records",
  lifetime_epsilon_cap: "Lifetime ε cap per seller",
  target: "Target bounds",
  out_of_bounds: "Values outside the bounds",
  partition: "Partition",
  record_key: "Record key",
  parties: "Parties",
  x: "Features",
  y: "Label",
};

const FIELD_HINTS = {
  mode: "strict: the allocation sees only costs and public data (end-to-end guarantee)",
  validation: "records used only to choose hyperparameters and γ; needed for the trade-off curve and for γ chosen for a budget",
  out_of_bounds: "reject: refuse the offer; clip: clip to the bounds",
};

PM.schemaForm = function (container, rootRef, components, { value, partial = false } = {}) {
  const resolve = (schema) => {
    let s = schema;
    while (s && s.$ref) s = components[s.$ref.split("/").pop()];
    return s || {};
  };
  // anyOf [X, null] → X, nullable
  const unwrap = (schema) => {
    const s = resolve(schema);
    if (s.anyOf) {
      const rest = s.anyOf.filter((a) => a.type !== "null");
      if (rest.length === 1) return { schema: { ...resolve(rest[0]), default: s.default }, nullable: true };
    }
    return { schema: s, nullable: false };
  };
  let counter = 0;
  const newId = (path) => `sf-${path.join("-").replace(/[^\w-]/g, "_")}-${counter++}`;
  const label = (name) =>
    /^\d+$/.test(String(name)) ? `#${Number(name) + 1}` : FIELD_LABELS[name] || String(name).replace(/_/g, " ");
  const singular = (text) => text.toLowerCase().replace(/ies$/, "y").replace(/s$/, "");

  // build(schema, path, initial, required) → { node, read() }
  // `loose`: inside an optional part, so no control is required by the browser.
  function build(schemaIn, path, initial, required, loose = false) {
    const { schema, nullable } = unwrap(schemaIn);
    const name = path[path.length - 1];
    const optional = nullable || !required;
    const must = !optional && !loose;
    const start = initial !== undefined ? initial : partial ? undefined : schema.default;
    const hintText = [FIELD_HINTS[name], schema.description && !schema.properties ? schema.description : null]
      .filter(Boolean)
      .join("; ");
    const wrap = (id, input) =>
      PM.el(
        "div",
        { class: "field" },
        PM.el("label", { for: id }, label(name), PM.el("code", { class: "tech" }, path.join("."))),
        PM.el("span", {}, input, hintText ? PM.el("span", { class: "hint" }, ` ${hintText}`) : null),
      );
    if (schema.oneOf && schema.discriminator) {
      const key = schema.discriminator.propertyName;
      const options = Object.keys(schema.discriminator.mapping);
      const id = newId(path);
      const select = PM.el("select", { id, "data-path": path.join(".") + ".family" }, options.map((o) => PM.el("option", { value: o, selected: start && start[key] === o }, o)));
      const box = PM.el("div", {});
      let inner = null;
      const show = () => {
        const variant = resolve({ $ref: schema.discriminator.mapping[select.value] });
        const props = { ...variant.properties };
        delete props[key];
        inner = build({ ...variant, properties: props }, path, start && start[key] === select.value ? start : undefined, true, loose);
        box.replaceChildren(inner.node);
      };
      select.addEventListener("change", show);
      show();
      const node = PM.el("fieldset", {}, PM.el("legend", {}, label(name)), wrap(id, select), box);
      return { node, read: () => ({ [key]: select.value, ...inner.read() }) };
    }
    if (schema.type === "object" && schema.properties) {
      const req = new Set(schema.required || []);
      const parts = Object.entries(schema.properties).map(([k, sub]) => [
        k,
        build(sub, [...path, k], start ? start[k] : undefined, req.has(k), loose || optional),
      ]);
      const legend = path.length ? PM.el("legend", {}, label(name)) : null;
      const node = path.length && !schema.discriminator
        ? PM.el(optional && !start ? "details" : "fieldset", { "data-part": path.join(".") },
            optional && !start ? PM.el("summary", {}, `${label(name)} (optional)`) : legend,
            parts.map(([, p]) => p.node))
        : PM.el("div", {}, parts.map(([, p]) => p.node));
      return {
        node,
        read: () => {
          const out = {};
          for (const [k, p] of parts) {
            const v = p.read();
            if (v !== undefined) out[k] = v;
          }
          if (optional && !Object.keys(out).length) return undefined;
          return out;
        },
      };
    }
    if (schema.type === "object") {
      // a free mapping (a prior's params): edited as JSON
      const id = newId(path);
      const input = PM.el("input", { id, "data-path": path.join("."), value: start === undefined ? "" : JSON.stringify(start), placeholder: "JSON object", required: must });
      return {
        node: wrap(id, input),
        read: () => {
          const text = input.value.trim();
          if (!text) return undefined;
          try {
            return JSON.parse(text);
          } catch (err) {
            throw new Error(`${path.join(".")}: not valid JSON`);
          }
        },
      };
    }
    if (schema.type === "array") {
      const items = resolve(schema.items);
      if (items.type === "object" || (items.properties && !items.anyOf)) {
        const rows = [];
        const list = PM.el("div", {});
        const add = (init) => {
          const row = build(items, [...path, String(rows.length)], init, true, loose);
          const remove = PM.el("button", { type: "button", class: "secondary" }, "Remove");
          const node = PM.el("div", { class: "row" }, row.node, remove);
          const entry = { row, node };
          remove.addEventListener("click", () => {
            rows.splice(rows.indexOf(entry), 1);
            node.remove();
          });
          rows.push(entry);
          list.append(node);
        };
        for (const init of Array.isArray(start) ? start : []) add(init);
        if (!optional && !rows.length && (schema.minItems || 0) > 0) add(undefined);
        const addButton = PM.el("button", { type: "button", class: "secondary", "data-add": path.join(".") }, `Add ${singular(label(name))}`);
        addButton.addEventListener("click", () => add(undefined));
        const node = PM.el("fieldset", {}, PM.el("legend", {}, `${label(name)}${optional ? " (optional)" : ""}`), PM.el("code", { class: "tech" }, path.join(".")), list, addButton);
        return {
          node,
          read: () => {
            if (optional && !rows.length) return undefined;
            return rows.map((r) => r.row.read());
          },
        };
      }
      // numbers or strings, comma-separated
      const id = newId(path);
      const numeric = ["number", "integer"].includes(items.type) || (items.anyOf || []).some((a) => a.type === "number");
      const input = PM.el("input", { id, "data-path": path.join("."), value: Array.isArray(start) ? start.map((v) => (v === null ? "" : v)).join(", ") : "", placeholder: numeric ? "comma-separated numbers" : "comma-separated", required: must });
      return {
        node: wrap(id, input),
        read: () => {
          const text = input.value.trim();
          if (!text) return optional ? undefined : [];
          return text.split(",").map((c) => {
            const t = c.trim();
            if (!numeric) return t;
            if (t === "") return null;
            const v = Number(t);
            if (!Number.isFinite(v)) throw new Error(`${path.join(".")}: ${JSON.stringify(t)} is not a number`);
            return v;
          });
        },
      };
    }
    const id = newId(path);
    if (schema.enum) {
      const choices = optional ? ["", ...schema.enum] : schema.enum;
      const select = PM.el("select", { id, "data-path": path.join(".") }, choices.map((c) => PM.el("option", { value: c, selected: c === start }, c === "" ? (partial ? "(unchanged)" : "(default)") : c)));
      return { node: wrap(id, select), read: () => (select.value === "" ? undefined : select.value) };
    }
    if (schema.type === "boolean") {
      const box = PM.el("input", { id, "data-path": path.join("."), type: "checkbox", checked: Boolean(start) });
      return { node: wrap(id, box), read: () => box.checked };
    }
    if (schema.type === "number" || schema.type === "integer") {
      const input = PM.el("input", {
        id,
        "data-path": path.join("."),
        type: "number",
        step: schema.type === "integer" ? "1" : "any",
        min: schema.minimum,
        max: schema.maximum,
        value: start === undefined || start === null ? null : start,
        required: must,
        placeholder: optional ? "empty: not set" : undefined,
      });
      return {
        node: wrap(id, input),
        read: () => {
          const t = input.value.trim();
          if (t === "") return undefined;
          return schema.type === "integer" ? parseInt(t, 10) : Number(t);
        },
      };
    }
    const input = PM.el("input", { id, "data-path": path.join("."), value: start ?? "", required: must, maxlength: schema.maxLength, placeholder: optional ? "empty: not set" : undefined });
    return { node: wrap(id, input), read: () => (input.value.trim() === "" && optional ? undefined : input.value) };
  }

  const form = build({ $ref: `#/components/schemas/${rootRef}` }, [], value, true);
  container.replaceChildren(form.node);
  container.classList.add("schema-form");
  return form;
};

PM.openapi = async function () {
  if (!PM._openapi) PM._openapi = await PM.api("/openapi.json");
  return PM._openapi.components.schemas;
};
