/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the tests that drive the UCX module through UCT's public API share,
 * on the host (test/gtest/uct/) and in the testbed
 * (test/gtest/integration/): registered buffers, interface addresses,
 * endpoints, the environment of one test.
 */
#ifndef RVT_TEST_UCT_API_H
#define RVT_TEST_UCT_API_H

#include <sys/mman.h>

#include <gtest/gtest.h>
#include <uct/api/uct.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rvt::test {

/* Sets environment variables for one test and puts them back after. */
class env_scope {
public:
    void set(const std::string &name, const std::string &value)
    {
        save(name);
        setenv(name.c_str(), value.c_str(), 1);
    }
    void unset(const std::string &name)
    {
        save(name);
        unsetenv(name.c_str());
    }
    ~env_scope()
    {
        for (const auto &[name, value] : m_saved) {
            if (value) {
                setenv(name.c_str(), value->c_str(), 1);
            } else {
                unsetenv(name.c_str());
            }
        }
    }

private:
    void save(const std::string &name)
    {
        if (!m_saved.count(name)) {
            const char *old = std::getenv(name.c_str());
            m_saved[name]   = old ? std::optional<std::string>(old) :
                                    std::nullopt;
        }
    }
    std::map<std::string, std::optional<std::string>> m_saved;
};

/* The UCT component called `name`, or nullptr. */
inline uct_component_h find_component(const std::string &name)
{
    uct_component_h *components;
    unsigned count;
    uct_component_h found = nullptr;
    EXPECT_EQ(uct_query_components(&components, &count), UCS_OK);
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        EXPECT_EQ(uct_component_query(components[i], &attr), UCS_OK);
        if (attr.name == name) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

/* The MD `name` of `component` with the environment's configuration, or
 * nullptr. */
inline uct_md_h open_uct_md(uct_component_h component, const std::string &name)
{
    uct_md_config_t *config;
    EXPECT_EQ(uct_md_config_read(component, nullptr, nullptr, &config), UCS_OK);
    uct_md_h md         = nullptr;
    ucs_status_t status = uct_md_open(component, name.c_str(), config, &md);
    uct_config_release(config);
    EXPECT_EQ(status, UCS_OK) << ucs_status_string(status);
    return status == UCS_OK ? md : nullptr;
}

/* Registered memory of the test's own, unmapped at the end. */
struct buffer {
    uct_md_h md    = nullptr;
    void *addr     = MAP_FAILED;
    size_t length  = 0;
    uct_mem_h memh = UCT_MEM_HANDLE_NULL;

    buffer(uct_md_h m, size_t len) : md(m), length(len)
    {
        addr = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (addr != MAP_FAILED &&
            uct_md_mem_reg(md, addr, len, UCT_MD_MEM_ACCESS_ALL, &memh) !=
                    UCS_OK) {
            memh = UCT_MEM_HANDLE_NULL;
        }
    }
    buffer(const buffer &)            = delete;
    buffer &operator=(const buffer &) = delete;
    ~buffer()
    {
        if (memh != UCT_MEM_HANDLE_NULL) {
            uct_md_mem_dereg(md, memh);
        }
        if (addr != MAP_FAILED) {
            munmap(addr, length);
        }
    }
    char *bytes() const
    {
        return static_cast<char *>(addr);
    }
    uct_iov_t iov(size_t len, size_t offset = 0) const
    {
        return {bytes() + offset, len, memh, 0, 1};
    }
};

/* Where an interface is: what uct_ep_create needs to reach it. */
struct iface_addresses {
    std::vector<char> dev, iface;

    uct_device_addr_t *dev_addr()
    {
        return reinterpret_cast<uct_device_addr_t *>(dev.data());
    }
    uct_iface_addr_t *iface_addr()
    {
        return reinterpret_cast<uct_iface_addr_t *>(iface.data());
    }
};

inline iface_addresses addresses_of(uct_iface_h iface)
{
    uct_iface_attr_t attr;
    iface_addresses a;
    EXPECT_EQ(uct_iface_query(iface, &attr), UCS_OK);
    a.dev.resize(attr.device_addr_len);
    a.iface.resize(attr.iface_addr_len);
    EXPECT_EQ(uct_iface_get_device_address(iface, a.dev_addr()), UCS_OK);
    EXPECT_EQ(uct_iface_get_address(iface, a.iface_addr()), UCS_OK);
    return a;
}

/* An endpoint from `from` to the interface at `to`, or nullptr. */
inline uct_ep_h
connect_ep(uct_iface_h from, iface_addresses &to, ucs_status_t expect = UCS_OK)
{
    uct_ep_params_t params{};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface        = from;
    params.dev_addr     = to.dev_addr();
    params.iface_addr   = to.iface_addr();
    uct_ep_h ep         = nullptr;
    ucs_status_t status = uct_ep_create(&params, &ep);
    EXPECT_EQ(status, expect) << ucs_status_string(status);
    return status == UCS_OK ? ep : nullptr;
}

} // namespace rvt::test

#endif
