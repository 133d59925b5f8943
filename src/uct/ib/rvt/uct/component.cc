/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rvt component's methods (component.h).
 */
#include "uct/ib/rvt/uct/component.h"

#include "uct/ib/rvt/client/devices.h"
#include "uct/ib/rvt/uct/md.h"

extern "C" {
#include <ucs/debug/memtrack_int.h>
}

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace rvt::uct {

ucs_status_t query_md_resources(uct_component_t *,
                                uct_md_resource_desc_t **resources_p,
                                unsigned *num_resources_p) noexcept
{
    try {
        std::vector<std::string> devices;
        for (const auto &port : client::list_ports()) {
            if (!port.active() ||
                (!devices.empty() && devices.back() == port.device)) {
                continue;
            }
            if (port.device.size() >= UCT_MD_NAME_MAX) {
                ucs_debug("rvt: device name %s is too long for an MD name",
                          port.device.c_str());
                continue;
            }
            devices.push_back(port.device);
        }
        if (devices.empty()) {
            return uct_md_query_empty_md_resource(resources_p, num_resources_p);
        }
        auto *resources = static_cast<uct_md_resource_desc_t *>(
                ucs_calloc(devices.size(), sizeof(uct_md_resource_desc_t),
                           "rvt md resources"));
        if (resources == nullptr) {
            return UCS_ERR_NO_MEMORY;
        }
        for (size_t k = 0; k < devices.size(); ++k) {
            std::snprintf(resources[k].md_name, sizeof(resources[k].md_name),
                          "%s", devices[k].c_str());
        }
        *resources_p     = resources;
        *num_resources_p = static_cast<unsigned>(devices.size());
        return UCS_OK;
    } catch (const std::exception &e) {
        ucs_error("rvt: listing devices: %s", e.what());
        return UCS_ERR_NO_MEMORY;
    }
}

ucs_status_t
rkey_unpack(const void *buffer, uct_rkey_t *rkey_p, void **handle_p) noexcept
{
    packed_rkey packed;
    std::memcpy(&packed, buffer, sizeof(packed));
    *rkey_p   = packed.rkey;
    *handle_p = nullptr;
    return UCS_OK;
}

ucs_status_t rkey_release(uct_component_t *, uct_rkey_t, void *) noexcept
{
    return UCS_OK;
}

void md_vfs_init(uct_md_h) noexcept
{
}

} // namespace rvt::uct
