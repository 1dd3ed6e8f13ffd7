-- Argo CD health check for vllm-operator.dev/VLLMDeployment.
--
-- Install it in argocd-cm (see docs/gitops.md):
--   resource.customizations.health.vllm-operator.dev_VLLMDeployment: |
--     <this file>
--
-- Healthy     the spec's revision serves with all its replicas (phase Serving, Ready=True)
-- Progressing the operator is working towards the spec (Pending, Progressing,
--             Benchmarking, Canary, Promoting), or has not yet observed the latest generation
-- Suspended   an inconclusive gate waits for a person (phase Holding: annotate the resource
--             to promote or abort); the stable revision keeps serving
-- Degraded    the spec's revision was rejected or cannot run (Degraded, Failed, or a
--             Stalled=True condition); the stable revision, if any, keeps serving
-- Unknown     a phase this check does not know (a newer operator): never Healthy by mistake

local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function text(value, fallback)
  if value == nil or value == "" then
    return fallback
  end
  return value
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local phase = status.phase
local message = text(status.message, phase)
local ready = condition(status.conditions, "Ready")
local stalled = condition(status.conditions, "Stalled")

if phase == "Holding" then
  hs.status = "Suspended"
  hs.message = message
  return hs
end

if phase == "Degraded" or phase == "Failed" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  if stalled ~= nil and stalled.status == "True" then
    hs.message = text(stalled.message, message)
  else
    hs.message = message
  end
  return hs
end

if phase == "Serving" then
  if ready ~= nil and ready.status ~= "True" then
    hs.status = "Progressing"
    hs.message = text(ready.message, message)
  else
    hs.status = "Healthy"
    hs.message = message
  end
  return hs
end

if phase == "Pending" or phase == "Progressing" or phase == "Benchmarking" or phase == "Canary" or phase == "Promoting" then
  hs.status = "Progressing"
  hs.message = message
  return hs
end

hs.status = "Unknown"
hs.message = "Unknown phase " .. tostring(phase) .. ": " .. message
return hs
