-- Argo CD's health of a Paddock object (Workspace, SandboxPolicy, Sandbox, SandboxPool,
-- AgentRun), read from what the operator writes: status.observedGeneration and the conditions
-- Stalled (Degraded), Reconciling (Progressing) and Ready (Healthy). A paused Sandbox is
-- Suspended. The same script serves every kind (docs/gitops.md).
local hs = {status = "Progressing", message = "Waiting for the operator to report"}
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end
local conditions = {}
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type ~= nil then
      conditions[condition.type] = condition
    end
  end
end
local function said(condition)
  local reason = condition.reason or ""
  local message = condition.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  return reason .. message
end
local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = said(stalled)
  return hs
end
if obj.kind == "Sandbox" and obj.status.phase == "Paused" then
  hs.status = "Suspended"
  local ready = conditions["Ready"]
  hs.message = ready ~= nil and said(ready) or "Paused"
  return hs
end
local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = said(reconciling)
  return hs
end
local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = said(ready)
  return hs
end
if ready ~= nil then
  hs.message = said(ready)
end
return hs
