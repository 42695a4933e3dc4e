# Debian packages (`make package`): rocetune-agent, rocetune-controller and
# rocetunectl, one CPack DEB component each. The install rules below are the
# packages' contents; CPack installs them from this build directory (no second
# build). Paths are relative to CPACK_PACKAGING_INSTALL_PREFIX "/", so /etc and
# /lib land where Debian expects them.

set(_pkg_dir ${PROJECT_SOURCE_DIR}/packaging)
set(_gen_dir ${PROJECT_BINARY_DIR}/packaging)
set(_version ${PROJECT_VERSION})
set(_release 1)
file(MAKE_DIRECTORY ${_gen_dir})

# changelog.Debian.gz: gzip -n keeps the package reproducible (no timestamp).
execute_process(
  COMMAND sh -c "gzip -9nc '${_pkg_dir}/changelog' > '${_gen_dir}/changelog.Debian.gz'"
  COMMAND_ERROR_IS_FATAL ANY)

# rocetune_package_common(COMPONENT PKG MANSECTION BINARY_TARGET DESCRIPTION)
function(rocetune_package_common comp pkg section target description)
  install(TARGETS ${target} RUNTIME DESTINATION usr/bin COMPONENT ${comp})
  install(FILES ${_pkg_dir}/copyright ${_gen_dir}/changelog.Debian.gz
          DESTINATION usr/share/doc/${pkg} COMPONENT ${comp})
  install(FILES ${_pkg_dir}/lintian/${pkg} DESTINATION usr/share/lintian/overrides
          COMPONENT ${comp})
  # Immediate binding (lintian hardening-no-bindnow): a link option, so only
  # the three shipped binaries relink.
  target_link_options(${target} PRIVATE -Wl,-z,now)
  # The man page is the binary's own --help, made at install time.
  install(CODE "
    file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/usr/share/man/man${section}\")
    execute_process(COMMAND ${PROJECT_SOURCE_DIR}/scripts/help-to-man
      \"$<TARGET_FILE:${target}>\" ${pkg} ${section} ${_version} \"${description}\"
      \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/usr/share/man/man${section}/${pkg}.${section}.gz\"
      COMMAND_ERROR_IS_FATAL ANY)" COMPONENT ${comp})
endfunction()

# rocetune_daemon_package(COMPONENT PKG CONFIG PURGE_COMMAND PURGE_NOTE): the
# unit, sysusers/tmpfiles entries, /etc files (conffiles) and maintainer scripts.
function(rocetune_daemon_package comp pkg config purge_command purge_note)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/${pkg}.service
          DESTINATION lib/systemd/system COMPONENT ${comp})
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/${pkg}.sysusers.conf
          DESTINATION usr/lib/sysusers.d RENAME ${pkg}.conf COMPONENT ${comp})
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/${pkg}.tmpfiles.conf
          DESTINATION usr/lib/tmpfiles.d RENAME ${pkg}.conf COMPONENT ${comp})
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/examples/fleet/${config}.textproto
          DESTINATION etc/rocetune COMPONENT ${comp})
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/examples/fleet/default-${pkg}
          DESTINATION etc/default RENAME ${pkg} COMPONENT ${comp})
  set(conffiles "/etc/rocetune/${config}.textproto\n/etc/default/${pkg}\n")
  if(pkg STREQUAL "rocetune-controller")
    install(FILES ${PROJECT_SOURCE_DIR}/deploy/examples/fleet/roles.textproto
            DESTINATION etc/rocetune COMPONENT ${comp})
    string(APPEND conffiles "/etc/rocetune/roles.textproto\n")
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operations.md
                ${PROJECT_SOURCE_DIR}/docs/security.md
          DESTINATION usr/share/doc/${pkg} COMPONENT ${comp})
  set(dir ${_gen_dir}/${pkg})
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/conffiles "${conffiles}")
  set(PKG ${pkg})
  set(PURGE_COMMAND "${purge_command}")
  set(PURGE_NOTE "${purge_note}")
  foreach(script postinst prerm postrm)
    configure_file(${_pkg_dir}/${script}.in ${dir}/${script} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                    GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
  string(TOUPPER ${comp} COMP)
  set(CPACK_DEBIAN_${COMP}_PACKAGE_CONTROL_EXTRA
      "${dir}/conffiles;${dir}/postinst;${dir}/prerm;${dir}/postrm" PARENT_SCOPE)
endfunction()

# --- rocetune-agent ---------------------------------------------------------
rocetune_package_common(agent rocetune-agent 8 rocetune-agent
  "per-host RoCE congestion counters, latency probes and DCQCN/PFC apply")
rocetune_daemon_package(agent rocetune-agent agent
  "rm -rf /var/lib/rocetune-agent"
  "the agent's state (its last-known-good journal).")

# --- rocetune-controller ----------------------------------------------------
rocetune_package_common(controller rocetune-controller 8 rocetune-controller
  "rocetune fleet controller: telemetry, policies, canary rollouts, rollback")
rocetune_daemon_package(controller rocetune-controller controller
  ": # the SQLite store and audit log in /var/lib/rocetune-controller are kept"
  "nothing else: the store and audit log under /var/lib/rocetune-controller are kept.")
install(FILES ${PROJECT_SOURCE_DIR}/docs/tuning-loop.md ${PROJECT_SOURCE_DIR}/docs/policies.md
        DESTINATION usr/share/doc/rocetune-controller COMPONENT controller)
# Example policies, configurations, dashboards and rules. The deploy/
# directories are copied whole at install time, so files added there ship
# without a CMake change.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/policies/ DESTINATION usr/share/rocetune/policies
        COMPONENT controller FILES_MATCHING PATTERN "*.textproto")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/examples/ DESTINATION usr/share/rocetune/examples
        COMPONENT controller)
foreach(d grafana prometheus)
  if(EXISTS ${PROJECT_SOURCE_DIR}/deploy/${d})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/${d}/ DESTINATION usr/share/rocetune/${d}
            COMPONENT controller)
  endif()
endforeach()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/pki/make-dev-pki.sh
        DESTINATION usr/share/rocetune/pki COMPONENT controller)

# --- rocetunectl --------------------------------------------------------------
rocetune_package_common(ctl rocetunectl 1 rocetunectl
  "inspect and steer a rocetune controller")
install(FILES ${PROJECT_SOURCE_DIR}/cli/README.md DESTINATION usr/share/doc/rocetunectl
        COMPONENT ctl)

# --- CPack --------------------------------------------------------------------
# CPack installs what the build made; it must not re-run the build (make package
# builds first, and the package test runs after the build).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL agent controller ctl)
set(CPACK_PACKAGING_INSTALL_PREFIX "/")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_NAME rocetune)
set(CPACK_PACKAGE_VERSION ${_version})
set(CPACK_PACKAGE_CONTACT "rocetune maintainers <rocetune-maintainers@example.org>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${_release})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # fast; the packages are small

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME rocetune-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "rdma-core, ibverbs-providers")
set(CPACK_COMPONENT_AGENT_DESCRIPTION
  "RoCE congestion-control agent for rocetune
The per-host daemon of rocetune: it reads every congestion signal a RoCE NIC
gives (CNPs, ECN marks, PFC pauses, retransmits), measures fabric latency
with RDMA verbs or UDP probes, reports to the rocetune controller over mutual
TLS and applies DCQCN and PFC parameter sets transactionally, with a
last-known-good journal and a local guard. It runs as an unprivileged user
with CAP_DAC_OVERRIDE and CAP_NET_ADMIN only.")

set(CPACK_DEBIAN_CONTROLLER_PACKAGE_NAME rocetune-controller)
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_SUGGESTS "rocetunectl, prometheus, grafana")
set(CPACK_COMPONENT_CONTROLLER_DESCRIPTION
  "RoCE congestion-control fleet controller for rocetune
The central daemon of rocetune: it collects counters and latency sketches
from every agent, keeps versioned tuning policies, proposes parameter
changes, rolls them out canary-first after an approval and rolls back on its
own when p99 fabric latency regresses. Ships example policies, multi-host
configurations, Prometheus rules and Grafana dashboards under
/usr/share/rocetune/.")

set(CPACK_DEBIAN_CTL_PACKAGE_NAME rocetunectl)
set(CPACK_DEBIAN_CTL_PACKAGE_SECTION admin)
set(CPACK_COMPONENT_CTL_DESCRIPTION
  "command-line client of the rocetune controller
rocetunectl shows the fleet, its hosts and the audit log, validates and
applies tuning policies, and proposes, approves, rolls back and aborts
changes and tuning campaigns on a rocetune controller over mutual TLS.")

include(CPack)
