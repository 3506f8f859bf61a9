// The live widget's view (widget.py): a policy picker and a field to type any
// spec, a save/recompute/offload toggle per checkpoint_name, a device picker,
// the status of the latest request (with its elapsed time while it traces)
// and the display `show` draws, sent by the kernel as HTML (every string in it
// escaped there). Each control sets one synced trait; the kernel answers.

const NEXT = { recompute: "save", save: "offload", offload: "recompute" };
const MARK = { recompute: "R", save: "S", offload: "O" };

function element(tag, props = {}, children = []) {
  const node = Object.assign(document.createElement(tag), props);
  for (const child of children) node.append(child);
  return node;
}

function render({ model, el }) {
  const policy = element("select", { title: "the outer policy" });
  const spec = element("input", {
    className: "spec",
    placeholder: "or type a spec: save_only_these_names('a')",
    title: "any policy spec, as after jax.checkpoint_policies. (enter applies it)",
  });
  const names = element("span", { className: "names" });
  const device = element("select", { title: "the device to trace for" });
  const status = element("div", { className: "status" });
  const error = element("div", { className: "error" });
  const display = element("div", { className: "display" });
  el.append(element("div", { className: "remat-tui-widget" }, [
    element("div", { className: "controls" }, [
      element("label", {}, ["policy", policy]),
      spec,
      element("label", { title: "checkpoint_name: R recompute, S save, O offload (click cycles)" },
              ["names", names]),
      element("label", {}, ["device", device]),
    ]),
    status, error, display,
  ]));

  const send = (name, value) => { model.set(name, value); model.save_changes(); };
  policy.addEventListener("change", () => send("policy", policy.value));
  device.addEventListener("change", () => send("device", device.value));
  spec.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && spec.value.trim()) send("policy", spec.value.trim());
  });

  function options(select, values, chosen) {
    select.replaceChildren(...values.map((v) => element("option", { value: v, textContent: v })));
    if (!values.includes(chosen)) select.append(element("option", { value: chosen, textContent: chosen }));
    select.value = chosen;
  }

  function drawNames() {
    const states = model.get("name_states");
    const decided = Object.keys(states).length > 0;
    names.replaceChildren(...model.get("names").map((name) => {
      const state = states[name] || "recompute";
      const button = element("button", {
        className: decided ? state : "undecided",
        textContent: `${decided ? MARK[state] : "·"} ${name}`,
        title: decided ? `${name}: ${state} (click: ${NEXT[state]})`
                       : `${name}: the policy does not decide by name (click: save)`,
      });
      button.addEventListener("click", () => {
        const next = { ...states };
        for (const other of model.get("names")) next[other] = next[other] || "recompute";
        next[name] = decided ? NEXT[state] : "save";
        send("name_states", next);
      });
      return button;
    }));
  }

  let timer = null;
  function drawStatus() {
    clearInterval(timer);
    status.classList.toggle("busy", model.get("busy"));
    status.textContent = model.get("status");
    if (model.get("busy")) {
      const start = Date.now();
      timer = setInterval(() => {
        status.textContent = `${model.get("status")} ${((Date.now() - start) / 1000).toFixed(1)} s`;
      }, 100);
    }
  }

  const draw = {
    policy: () => options(policy, model.get("policy_choices"), model.get("policy")),
    device: () => options(device, model.get("device_choices"), model.get("device")),
    names: drawNames,
    status: drawStatus,
    error: () => { error.textContent = model.get("error"); },
    html: () => { display.innerHTML = model.get("html"); },
  };
  const watched = {
    policy: ["policy", "policy_choices"], device: ["device", "device_choices"],
    names: ["names", "name_states"], status: ["status", "busy"], error: ["error"], html: ["html"],
  };
  for (const [part, traits] of Object.entries(watched)) {
    for (const trait of traits) model.on(`change:${trait}`, draw[part]);
    draw[part]();
  }
  return () => clearInterval(timer);
}

export default { render };
