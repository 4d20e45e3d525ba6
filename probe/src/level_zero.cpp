// SPDX-License-Identifier: GPL-2.0-or-later
// The Level Zero probe: asks the loader (libze_loader.so.1, opened with dlopen so that the tool runs
// where it is not installed) for its drivers, their devices, each device's PCI function, and per
// ordered pair of devices of one driver what zeDeviceCanAccessPeer and zeDeviceGetP2PProperties
// say. Every runtime call runs in a child (isolate.h): the enumeration in one, each pair in its own.
// Opt-in steps in their own files and children: --copy (level_zero_copy.cpp) and --mirror
// (level_zero_mirror.cpp). docs/probe-level-zero.md describes what is asked and what the answers mean.
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "level_zero_api.h"
#include "level_zero_steps.h"
#include "p2paudit/probe/isolate.h"
#include "p2paudit/probe/probe.h"
#include "session.h"

namespace p2paudit::probe {
namespace {

using namespace level_zero;
using nlohmann::json;
using nlohmann::ordered_json;

// The driver's extension names (empty when the call is missing or fails).
std::vector<std::string> driver_extensions(const Api& api, ze_driver_handle_t driver) {
  std::vector<std::string> names;
  if (!api.DriverGetExtensionProperties) return names;
  uint32_t n = 0;
  if (api.DriverGetExtensionProperties(driver, &n, nullptr) != ZE_RESULT_SUCCESS || n == 0) return names;
  std::vector<ze_driver_extension_properties_t> props(n);
  if (api.DriverGetExtensionProperties(driver, &n, props.data()) != ZE_RESULT_SUCCESS) return names;
  for (uint32_t i = 0; i < n && i < props.size(); ++i) {
    names.emplace_back(props[i].name, strnlen(props[i].name, sizeof props[i].name));
  }
  return names;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

// The enumeration child's body.
json enumerate_body() {
  Api api;
  if (std::string e = open_loader(api); !e.empty()) return json{{"absent", e}};
  json out = json::object();
  Walk w;
  std::optional<json> failure;
  try {
    w = walk(api);
  } catch (const CallFailed& f) {
    failure = f.failure;
  }
  // The loader fills its component list in zeInit.
  if (api.LoaderGetVersions) {
    size_t n = 0;
    if (api.LoaderGetVersions(&n, nullptr) == ZE_RESULT_SUCCESS && n) {
      std::vector<zel_component_version_t> versions(n);
      if (api.LoaderGetVersions(&n, versions.data()) == ZE_RESULT_SUCCESS) {
        for (size_t i = 0; i < n && i < versions.size(); ++i) {
          const auto& v = versions[i];
          out["components"][std::string(v.component_name, strnlen(v.component_name, sizeof v.component_name))] =
              std::to_string(v.component_lib_version.major) + "." + std::to_string(v.component_lib_version.minor) +
              "." + std::to_string(v.component_lib_version.patch);
        }
      }
    }
  }
  if (failure) {
    out["failure"] = *failure;
    return out;
  }
  out["drivers"] = json::array();
  for (size_t d = 0; d < w.drivers.size(); ++d) {
    json dj = json::object();
    isolated_phase("zeDriverGetProperties");
    ze_driver_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    if (api.DriverGetProperties) {
      ze_result_t r = api.DriverGetProperties(w.drivers[d], &props);
      if (r == ZE_RESULT_SUCCESS) {
        const uint32_t v = props.driverVersion;
        dj["driver_version_raw"] = v;
        // Intel's compute-runtime encodes major << 24 | minor << 16 | build.
        dj["driver_version"] = std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 0xff) + "." +
                               std::to_string(v & 0xffff);
      } else {
        dj["driver_properties_error"] = call_json("zeDriverGetProperties", r);
      }
    }
    if (api.DriverGetApiVersion) {
      ze_api_version_t v{};
      if (api.DriverGetApiVersion(w.drivers[d], &v) == ZE_RESULT_SUCCESS) {
        dj["api_version"] = std::to_string(ZE_MAJOR_VERSION(v)) + "." + std::to_string(ZE_MINOR_VERSION(v));
      }
    }
    isolated_phase("zeDriverGetExtensionProperties");
    const auto extensions = driver_extensions(api, w.drivers[d]);
    dj["extensions"] = extensions;
    // The compute-runtime release ("24.35.30872.22"), which the advisories test.
    if (has(extensions, "ZE_intel_get_driver_version_string") && api.DriverGetExtensionFunctionAddress) {
      isolated_phase("zeIntelGetDriverVersionString");
      using VersionString = ze_result_t (*)(ze_driver_handle_t, char*, size_t*);
      void* fn = nullptr;
      if (api.DriverGetExtensionFunctionAddress(w.drivers[d], "zeIntelGetDriverVersionString", &fn) ==
              ZE_RESULT_SUCCESS && fn) {
        auto get = reinterpret_cast<VersionString>(fn);
        size_t size = 0;
        if (get(w.drivers[d], nullptr, &size) == ZE_RESULT_SUCCESS && size > 0 && size < 4096) {
          std::string s(size, '\0');
          if (get(w.drivers[d], s.data(), &size) == ZE_RESULT_SUCCESS) {
            s.resize(strnlen(s.c_str(), s.size()));
            dj["compute_runtime_version"] = s;
          }
        }
      }
    }
    dj["devices"] = json::array();
    for (size_t i = 0; i < w.devices[d].size(); ++i) {
      auto* dev = w.devices[d][i];
      json devj = json::object();
      isolated_phase("zeDeviceGetProperties");
      ze_device_properties_t dp{};
      dp.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      ze_result_t r = api.DeviceGetProperties(dev, &dp);
      if (r == ZE_RESULT_SUCCESS) {
        devj["name"] = std::string(dp.name, strnlen(dp.name, sizeof dp.name));
        char ids[16];
        std::snprintf(ids, sizeof ids, "%04x:%04x", dp.vendorId, dp.deviceId);
        devj["pci_id"] = ids;
        devj["type"] = static_cast<int>(dp.type);
      } else {
        devj["properties_error"] = call_json("zeDeviceGetProperties", r);
      }
      isolated_phase("zeDevicePciGetPropertiesExt");
      if (api.DevicePciGetPropertiesExt) {
        ze_pci_ext_properties_t pp{};
        pp.stype = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
        r = api.DevicePciGetPropertiesExt(dev, &pp);
        if (r == ZE_RESULT_SUCCESS) {
          devj["pci_address"] = pci_string(pp.address);
          if (pp.maxSpeed.genVersion > 0) devj["pci_gen"] = pp.maxSpeed.genVersion;
          if (pp.maxSpeed.width > 0) devj["pci_width"] = pp.maxSpeed.width;
        } else {
          devj["pci_error"] = call_json("zeDevicePciGetPropertiesExt", r);
        }
      } else {
        devj["pci_error"] = "the loader has no zeDevicePciGetPropertiesExt";
      }
      dj["devices"].push_back(devj);
    }
    // Fabric (Xe Link): vertices and the edges between every two of them, when the driver has it.
    if (api.FabricVertexGetExp) {
      isolated_phase("zeFabricVertexGetExp");
      uint32_t n = 0;
      ze_result_t r = api.FabricVertexGetExp(w.drivers[d], &n, nullptr);
      if (r != ZE_RESULT_SUCCESS) {
        dj["fabric_error"] = call_json("zeFabricVertexGetExp", r);
      } else {
        std::vector<ze_fabric_vertex_handle_t> vertices(n);
        if (n) r = api.FabricVertexGetExp(w.drivers[d], &n, vertices.data());
        vertices.resize(r == ZE_RESULT_SUCCESS ? n : 0);
        json vj = json::array();
        for (auto* v : vertices) {
          json one = json::object();
          ze_fabric_vertex_exp_properties_t vp{};
          vp.stype = ZE_STRUCTURE_TYPE_FABRIC_VERTEX_EXP_PROPERTIES;
          if (api.FabricVertexGetPropertiesExp && api.FabricVertexGetPropertiesExp(v, &vp) == ZE_RESULT_SUCCESS) {
            ze_pci_address_ext_t a{vp.address.domain, vp.address.bus, vp.address.device, vp.address.function};
            one["pci_address"] = pci_string(a);
            one["type"] = static_cast<int>(vp.type);
            one["remote"] = vp.remote != 0;
          }
          vj.push_back(one);
        }
        json ej = json::array();
        if (api.FabricEdgeGetExp) {
          isolated_phase("zeFabricEdgeGetExp");
          for (size_t a = 0; a < vertices.size(); ++a) {
            for (size_t b = a + 1; b < vertices.size(); ++b) {
              uint32_t ne = 0;
              if (api.FabricEdgeGetExp(vertices[a], vertices[b], &ne, nullptr) != ZE_RESULT_SUCCESS || ne == 0) continue;
              std::vector<ze_fabric_edge_handle_t> edges(ne);
              if (api.FabricEdgeGetExp(vertices[a], vertices[b], &ne, edges.data()) != ZE_RESULT_SUCCESS) continue;
              for (uint32_t e = 0; e < ne && e < edges.size(); ++e) {
                json edge{{"a", a}, {"b", b}};
                ze_fabric_edge_exp_properties_t ep{};
                ep.stype = ZE_STRUCTURE_TYPE_FABRIC_EDGE_EXP_PROPERTIES;
                if (api.FabricEdgeGetPropertiesExp && api.FabricEdgeGetPropertiesExp(edges[e], &ep) == ZE_RESULT_SUCCESS) {
                  edge["model"] = std::string(ep.model, strnlen(ep.model, sizeof ep.model));
                  edge["bandwidth"] = ep.bandwidth;
                  edge["bandwidth_unit"] = static_cast<int>(ep.bandwidthUnit);
                }
                ej.push_back(edge);
              }
            }
          }
        }
        dj["fabric_vertices"] = vj;
        dj["fabric_edges"] = ej;
      }
    }
    out["drivers"].push_back(dj);
  }
  return out;
}

// The pair child's body: provider and client are (driver, device) positions of the walk.
json pair_body(size_t driver, size_t provider, size_t client) {
  Api api;
  if (std::string e = open_loader(api); !e.empty()) return json{{"absent", e}};
  Walk w;
  try {
    w = walk(api);
  } catch (const CallFailed& f) {
    return json{{"failure", f.failure}};
  }
  if (driver >= w.devices.size() || provider >= w.devices[driver].size() || client >= w.devices[driver].size()) {
    return json{{"failure", {{"call", "zeDeviceGet"}, {"name", "the devices changed since the enumeration"}}}};
  }
  auto* a = w.devices[driver][provider];
  auto* b = w.devices[driver][client];
  json answers = json::object();
  auto put = [&](const std::string& name, const json& value) {
    answers[name] = value;
    isolated_partial(json{{"answer", name}, {"value", value}});
  };
  const std::string where = "(" + std::to_string(provider) + " -> " + std::to_string(client) + ")";
  if (api.DeviceCanAccessPeer) {
    isolated_phase("zeDeviceCanAccessPeer" + where);
    ze_bool_t can = 0;
    ze_result_t r = api.DeviceCanAccessPeer(a, b, &can);
    if (r == ZE_RESULT_SUCCESS) {
      put("can_access_peer", can ? "ok" : "not_supported");
    } else {
      put("can_access_peer", call_json("zeDeviceCanAccessPeer", r));
    }
  }
  if (api.DeviceGetP2PProperties) {
    const bool bandwidth_ext = has(driver_extensions(api, w.drivers[driver]), ZE_BANDWIDTH_PROPERTIES_EXP_NAME);
    isolated_phase("zeDeviceGetP2PProperties" + where);
    ze_device_p2p_properties_t p2p{};
    p2p.stype = ZE_STRUCTURE_TYPE_DEVICE_P2P_PROPERTIES;
    ze_device_p2p_bandwidth_exp_properties_t bw{};
    bw.stype = ZE_STRUCTURE_TYPE_DEVICE_P2P_BANDWIDTH_EXP_PROPERTIES;
    if (bandwidth_ext) p2p.pNext = &bw;
    ze_result_t r = api.DeviceGetP2PProperties(a, b, &p2p);
    if (r == ZE_RESULT_SUCCESS) {
      put("access", (p2p.flags & ZE_DEVICE_P2P_PROPERTY_FLAG_ACCESS) ? "ok" : "not_supported");
      put("atomics", (p2p.flags & ZE_DEVICE_P2P_PROPERTY_FLAG_ATOMICS) ? "ok" : "not_supported");
      if (bandwidth_ext) {
        put("bandwidth", json{{"logical", bw.logicalBandwidth},
                              {"physical", bw.physicalBandwidth},
                              {"unit", bw.bandwidthUnit == ZE_BANDWIDTH_UNIT_BYTES_PER_NANOSEC ? "bytes/ns"
                                       : bw.bandwidthUnit == ZE_BANDWIDTH_UNIT_BYTES_PER_CLOCK ? "bytes/clock"
                                                                                               : "unknown"},
                              {"logical_latency", bw.logicalLatency},
                              {"physical_latency", bw.physicalLatency},
                              {"latency_unit", bw.latencyUnit == ZE_LATENCY_UNIT_NANOSEC ? "ns"
                                               : bw.latencyUnit == ZE_LATENCY_UNIT_CLOCK ? "clock"
                                               : bw.latencyUnit == ZE_LATENCY_UNIT_HOP ? "hop"
                                                                                       : "unknown"}});
      }
    } else {
      const json failure = call_json("zeDeviceGetP2PProperties", r);
      put("access", failure);
      put("atomics", failure);
    }
  }
  return json{{"answers", answers}};
}

// A pair answer's value: "ok"/"not_supported" as is; a failed call as its code name, with the
// raw code beside it in "<answer>_code" (the header's convention: the value is the code's name).
void store_answer(ordered_json& answers, const std::string& name, const json& value) {
  if (value.is_object() && value.contains("name") && value.contains("code")) {
    answers[name] = value["name"];
    answers[name + "_code"] = value["code"];
  } else {
    answers[name] = value;
  }
}

// The enumeration, then every pair (and with --copy its copy); `slots` gets the devices found.
RuntimeReport probe_devices(const ProbeOptions& options, std::vector<DeviceSlot>& slots) {
  RuntimeReport report;
  report.runtime = "level_zero";
  report.library = kLoaderLibrary;
  const IsolatedResult en = run_isolated("zeInit", options.timeout_seconds, [] { return enumerate_body(); });
  if (!en.ok()) {
    report.status = en.status;  // crashed, hung, failed
    report.phase = en.phase;
    report.error = en.error;
    return report;
  }
  const json& v = en.value;
  if (v.contains("absent")) {
    report.status = "absent";
    report.error = v["absent"].get<std::string>();
    return report;
  }
  std::string loader_version;
  if (v.contains("components") && v["components"].contains("loader")) {
    loader_version = v["components"]["loader"].get<std::string>();
  }
  if (v.contains("failure")) {
    const json& f = v["failure"];
    // The loader without any driver answers zeInit with ZE_RESULT_ERROR_UNINITIALIZED: there is
    // no Level Zero runtime on this machine, which is not a failure.
    if (f.value("call", "") == "zeInit" && f.value("value", 0u) == 0x78000001u) {
      report.status = "absent";
      report.error = "no Level Zero driver (" + failure_text(f) + ")";
    } else {
      report.status = "failed";
      report.phase = f.value("call", "");
      report.error = failure_text(f);
    }
    return report;
  }
  const json& drivers = v["drivers"];
  if (drivers.empty()) {
    report.status = "absent";
    report.error = "no Level Zero driver (zeDriverGet found none)";
    return report;
  }
  report.status = "ok";
  // The first driver's version stands for the report; each device carries its own driver's.
  for (size_t d = 0; d < drivers.size(); ++d) {
    const json& dj = drivers[d];
    std::string version = dj.value("compute_runtime_version", dj.value("driver_version", std::string()));
    if (report.driver_version.empty()) report.driver_version = version;
  }

  for (size_t d = 0; d < drivers.size(); ++d) {
    const json& dj = drivers[d];
    const json& devices = dj["devices"];
    for (size_t i = 0; i < devices.size(); ++i) {
      const json& devj = devices[i];
      RuntimeDevice dev;
      dev.index = static_cast<int>(report.devices.size());
      dev.name = devj.value("name", std::string());
      if (devj.contains("pci_address")) dev.bdf = Bdf::parse(devj["pci_address"].get<std::string>());
      dev.extra["driver"] = d;
      dev.extra["driver_device_index"] = i;
      for (const char* key : {"pci_id", "pci_address", "pci_gen", "pci_width", "properties_error", "pci_error"}) {
        if (devj.contains(key)) dev.extra[key] = devj[key];
      }
      for (const char* key : {"driver_version", "driver_version_raw", "compute_runtime_version", "api_version"}) {
        if (dj.contains(key)) dev.extra[key] = dj[key];
      }
      if (!loader_version.empty()) dev.extra["loader_version"] = loader_version;
      if (dj.contains("fabric_vertices")) {
        dev.extra["fabric_vertices"] = dj["fabric_vertices"].size();
        dev.extra["fabric_edges"] = dj["fabric_edges"];
      } else if (dj.contains("fabric_error")) {
        dev.extra["fabric_error"] = dj["fabric_error"];
      }
      slots.push_back({dev.index, d, i, dev.bdf ? dev.bdf->str() : std::string()});
      report.devices.push_back(std::move(dev));
    }
  }

  // Every ordered pair of devices of one driver, each in a child of its own (a fresh zeInit: what
  // one pair did to the driver is not the next pair's question); a pair that crashes or hangs is
  // that pair's answer, and the other pairs still run.
  std::vector<std::pair<size_t, size_t>> pairs;  // positions in slots
  for (size_t p = 0; p < slots.size(); ++p)
    for (size_t c = 0; c < slots.size(); ++c)
      if (p != c && slots[p].driver == slots[c].driver) pairs.emplace_back(p, c);
  detail::PairChildren queries;
  queries.phase = "zeInit";
  queries.per_child = 1;
  queries.max_deaths = std::numeric_limits<int>::max();
  queries.count = [&] { return std::optional<size_t>(pairs.size()); };
  queries.progress = [&](size_t item, size_t) {
    const auto [p, c] = pairs[item];
    options.report_progress(fmt::format("level_zero: pair {} -> {}", slots[p].bdf.empty() ? std::to_string(p) : slots[p].bdf,
                                        slots[c].bdf.empty() ? std::to_string(c) : slots[c].bdf));
  };
  queries.ask = [&](size_t item, size_t) {
    const auto [p, c] = pairs[item];
    return pair_body(slots[p].driver, slots[p].position, slots[c].position);
  };
  const auto new_pair = [&](size_t item) -> PairAnswer& {
    PairAnswer& pair = report.pairs.emplace_back();
    pair.provider = static_cast<int>(pairs[item].first);
    pair.client = static_cast<int>(pairs[item].second);
    return pair;
  };
  // A pair the child did not answer: what it said before it died is kept; the rest is why.
  const auto unanswered = [&](size_t item, const IsolatedResult& r) {
    PairAnswer& pair = new_pair(item);
    for (const json& piece : r.partial) {
      if (piece.contains("answer")) store_answer(pair.answers, piece["answer"].get<std::string>(), piece["value"]);
    }
    const std::string status = r.ok() ? "failed" : r.status;
    std::string error = r.error;
    if (r.ok() && r.value.contains("failure")) error = failure_text(r.value["failure"]);
    if (r.ok() && r.value.contains("absent")) error = r.value["absent"].get<std::string>();
    pair.answers["status"] = status;
    pair.answers["phase"] = r.phase;
    pair.answers["error"] = error;
    for (const char* name : {"can_access_peer", "access", "atomics"}) {
      if (!pair.answers.contains(name)) pair.answers[name] = status == "failed" ? "unknown" : status;
    }
    // A pair that crashed or hung; one that failed is that pair's answer only.
    if (status == "crashed" || status == "hung") detail::report_first_death(report, status, r.phase, error);
    return true;
  };
  queries.take = [&](const IsolatedResult& r, size_t item) -> std::optional<size_t> {
    if (!r.ok()) return 0;
    if (!r.value.contains("answers")) {
      unanswered(item, r);
      return 1;
    }
    PairAnswer& pair = new_pair(item);
    for (const auto& [name, value] : r.value["answers"].items()) store_answer(pair.answers, name, value);
    return 1;
  };
  queries.charge = unanswered;
  detail::run_pair_children(queries, options.timeout_seconds);
  if (options.copy.enabled) copy_pairs(report, slots, options);
  return report;
}

}  // namespace

RuntimeReport probe_level_zero(const ProbeOptions& options) {
  std::vector<DeviceSlot> slots;  // per report device: where every child finds it
  RuntimeReport report = probe_devices(options, slots);
  if (options.mirror) measure_mirror(report, slots, options);  // a note when there is no device
  return report;
}

}  // namespace p2paudit::probe
