# Debian packages (`make package`): rocetune-agent, rocetune-controller and
# rocetunectl, and the job signal's libraries (librocetune-job1,
# librocetune-job-dev, librocetune-pmpi1), one CPack DEB component each. The install rules below are the
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

# --- the job signal's libraries (docs/job-signal.md) ---------------------------
# What a training job's hosts install beside the agent: the C client
# (librocetune-job1), its header and link symlink (librocetune-job-dev, with the
# Python example) and the MPI profiling wrapper a job preloads
# (librocetune-pmpi1, when Open MPI's C bindings were found at configure time).
set(_libdir usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
function(rocetune_job_package_docs comp pkg)
  install(FILES ${_pkg_dir}/copyright ${_gen_dir}/changelog.Debian.gz
          DESTINATION usr/share/doc/${pkg} COMPONENT ${comp})
  if(EXISTS ${_pkg_dir}/lintian/${pkg})
    install(FILES ${_pkg_dir}/lintian/${pkg} DESTINATION usr/share/lintian/overrides
            COMPONENT ${comp})
  endif()
endfunction()
install(TARGETS rocetune_job LIBRARY DESTINATION ${_libdir} COMPONENT job NAMELINK_SKIP)
rocetune_job_package_docs(job librocetune-job1)
install(TARGETS rocetune_job LIBRARY DESTINATION ${_libdir} COMPONENT jobdev NAMELINK_ONLY)
install(FILES ${PROJECT_SOURCE_DIR}/jobsignal/client/rocetune_job.h DESTINATION usr/include
        COMPONENT jobdev)
install(FILES ${PROJECT_SOURCE_DIR}/docs/job-signal.md DESTINATION usr/share/doc/librocetune-job-dev
        COMPONENT jobdev)
install(FILES ${PROJECT_SOURCE_DIR}/jobsignal/examples/report_steps.py
        DESTINATION usr/share/doc/librocetune-job-dev/examples COMPONENT jobdev)
rocetune_job_package_docs(jobdev librocetune-job-dev)
# A package with a shared library in the library path activates the ldconfig
# trigger (Debian policy 8.1.1), rather than calling ldconfig from scripts.
file(MAKE_DIRECTORY ${_gen_dir}/ldconfig)
file(WRITE ${_gen_dir}/ldconfig/triggers "activate-noawait ldconfig\n")
set(_components agent controller ctl job jobdev)
if(TARGET rocetune_pmpi)
  # Preloaded (LD_PRELOAD) or linked before libmpi, never linked against by
  # name: the versioned file and its soname link only.
  install(TARGETS rocetune_pmpi LIBRARY DESTINATION ${_libdir} COMPONENT pmpi NAMELINK_SKIP)
  rocetune_job_package_docs(pmpi librocetune-pmpi1)
  list(APPEND _components pmpi)
endif()

# --- CPack --------------------------------------------------------------------
# CPack installs what the build made; it must not re-run the build (make package
# builds first, and the package test runs after the build).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${_components})
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
# A shlibs file (and the ldconfig trigger) for the packages that ship a
# shared library; the others have none to describe.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# A package built against librocetune-job-dev then needs this version or a later one
# (Debian policy 8.6.4), not exactly this build.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
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

set(CPACK_DEBIAN_JOB_PACKAGE_NAME librocetune-job1)
set(CPACK_DEBIAN_JOB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_JOB_PACKAGE_CONTROL_EXTRA ${_gen_dir}/ldconfig/triggers)
set(CPACK_COMPONENT_JOB_DESCRIPTION
  "rocetune job signal client library
A training job (or its launcher) calls it to tell the local rocetune agent
how long each step or collective took, over the agent's Unix socket. Sending
never blocks and never fails the job. C, callable from C++ and, through
ctypes, Python.")

set(CPACK_DEBIAN_JOBDEV_PACKAGE_NAME librocetune-job-dev)
set(CPACK_DEBIAN_JOBDEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_JOBDEV_PACKAGE_DEPENDS "librocetune-job1 (= ${_version}-${_release})")
set(CPACK_COMPONENT_JOBDEV_DESCRIPTION
  "rocetune job signal client library (development files)
The header and link symlink of librocetune-job1, with which a training job
tells the local rocetune agent how long its steps and collectives took, the
interface's description and a Python example (ctypes).")

set(CPACK_DEBIAN_PMPI_PACKAGE_NAME librocetune-pmpi1)
set(CPACK_DEBIAN_PMPI_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PMPI_PACKAGE_CONTROL_EXTRA ${_gen_dir}/ldconfig/triggers)
set(CPACK_COMPONENT_PMPI_DESCRIPTION
  "rocetune job signal for MPI programs (profiling interface)
Preloaded into an MPI program, it times every MPI_Allreduce, MPI_Alltoall
and MPI_Barrier through the MPI profiling interface and reports them to the
local rocetune agent, with no change to the program.")

include(CPack)
