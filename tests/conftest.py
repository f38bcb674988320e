"""Shared pytest set-up: the course device is decided (and TRITON_INTERPRET set) before any kernel import.

Tiers (README, "Tests"): `make check` runs the unit tier, tests that start no process (no grading worker,
no `check` child, no notebook, no nbgrader, no Dask) and are not `slow`; `make test` runs every test. A test
that starts a Python process or forks is marked `worker` (and one that executes a notebook `notebook` too),
here in WORKER_TESTS / NOTEBOOK_TESTS or by its own mark. In the unit tier (COURSE_TEST_TIER=unit, set by `make check`) starting one
fails the test with a message that says so, so the tiers cannot drift.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# One thread for torch's (OpenMP) and numpy's (OpenBLAS) operators in every process of the run: set before
# torch is imported, here and in what inherits the environment (pytest-xdist's test processes, grading
# workers, notebook kernels, commands). `make test` runs as many test processes as there are cores, each
# starting workers of its own: a second thread only waits for a core, spinning. Measured on the 2-core
# machine (2 test processes; specs 08, flash rounding, memory-bound and flash kernels): 139 s and 261 s of CPU
# with torch's default of a thread per core, 102 s and 192 s with one. OMP_NUM_THREADS set beforehand wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import course  # noqa: E402,F401  (must come first: sets TRITON_INTERPRET=1 without a GPU)
import pytest  # noqa: E402
import torch  # noqa: E402

# Tests that start a grading worker, a `check` child, a Python subprocess, nbgrader or a Dask cluster:
# module -> the tests of it that do ("*": every test of the module).
WORKER_TESTS: dict[str, set[str] | str] = {
    "test_autograder_escapes": {"test_a_content_keyed_cache_scores_zero_and_is_named",
        "test_the_course_measuring_tools_handed_to_another_measure_function_score_zero_and_are_named",
        "test_a_tensor_method_replaced_scores_zero",
        "test_a_learners_object_handed_to_a_launch_scores_zero_and_the_line_is_named",
        "test_a_library_softmax_handed_to_the_kernel_as_an_argument_scores_zero_and_is_named",
        "test_a_library_function_as_a_launch_callback_is_refused_and_the_line_is_named",
        "test_the_course_measuring_tools_given_as_the_answer_score_zero_and_are_named",
        "test_check_refuses_the_course_measuring_tools_as_the_grade_does",
        "test_a_forbidden_call_no_graded_call_runs_is_a_note_and_costs_nothing",
        "test_code_started_inside_the_recorders_handlers_scores_zero_and_is_named",
        "test_the_learners_backward_runs_seen_as_the_forward_does",
        "test_what_dies_with_a_storage_set__lets_go_of_runs_under_the_recorder",
        "test_a_storage_that_carries_code_of_its_own_is_refused_before_an_operator_can_free_it",
        "test_a_launch_made_from_a_grid_callable_is_counted",
        "test_a_module_beside_the_submission_is_audited_as_the_submission",
        "test_an_output_of_the_learners_own_class_is_refused_before_it_can_compute",
        "test_bytecode_beside_the_submission_costs_the_points_and_the_message_names_the_file",
        "test_a_public_style_fused_loss_keeps_every_correctness_point",
        "test_honest_idioms_keep_every_correctness_point",
        "test_forged_replies_at_import_score_zero_and_the_writes_are_named",
        "test_imports_from_outside_the_installed_packages_are_refused",
        "test_logits_written_through_out_count_against_the_size_rule",
        "test_operators_run_inside_a_launch_are_seen_and_cost_the_points",
        "test_outputs_that_another_library_computed_score_zero_and_the_line_is_named",
        "test_outputs_that_do_not_come_from_the_kernels_score_zero",
        "test_patching_the_clocks_and_the_grader_scores_zero_and_names_each_patch",
        "test_reaching_the_grader_through_frames_or_module_aliases_scores_zero_and_is_named",
        "test_reaching_the_recorder_on_the_mode_stack_by_any_spelling_scores_zero_and_is_named",
        "test_operators_called_below_the_python_key_score_zero_and_are_named",
        "test_modules_reached_through_a_parameter_score_zero_and_both_layers_name_the_lines",
        "test_a_library_patched_through_a_parameter_scores_zero_and_the_line_is_named",
        "test_telling_a_checked_call_from_a_timed_one_scores_zero_and_the_fallback_is_named",
        "test_work_started_on_another_thread_is_refused_and_the_line_is_named",
        "test_values_that_leave_torch_as_text_or_through_the_standard_library_score_zero_and_are_named",
        "test_python_in_a_kernel_and_a_library_softmax_in_its_place_score_zero_and_are_named",
        "test_a_kernel_triton_reads_other_than_the_audited_one_scores_zero_and_is_named",
        "test_a_name_the_interpreter_left_in_the_module_is_neither_there_nor_readable"},
    "test_autograder_gpu": {"test_slow_and_deferred_submissions_are_graded_for_correctness",
                            "test_the_recorded_call_on_the_timed_workload_is_judged_on_fresh_values"},
    "test_runtime_audit": "*",
    "test_grading_setup_failure": "*",
    "test_seed_scan": {"test_a_real_grading_keeps_its_seed_and_the_seed_remakes_its_cases"},
    "test_autograder_guarantees": {"test_a_hang_is_stopped_at_the_time_limit_and_other_exercises_are_graded",
        "test_a_second_call_wrong_without_a_cache_is_not_called_a_cache",
        "test_a_started_worker_is_stopped_whether_it_was_used_or_not",
        "test_a_worker_ends_at_once_after_its_last_answer",
        "test_an_exception_at_import_is_reported_with_its_line",
        "test_calling_the_taught_operator_is_a_violation_naming_op_and_line",
        "test_cases_cover_odd_tiny_dtypes_hard_rows_and_strides",
        "test_cases_rotate_through_an_autotuners_configs_and_name_the_one_that_failed",
        "test_correct_triton_kernels_get_every_correctness_point",
        "test_exits_crashes_and_oom_cost_only_their_exercise", "test_fresh_memory_is_poisoned_in_the_worker",
        "test_ignoring_row_strides_fails_the_strided_case", "test_importing_kernels_ref_is_a_violation",
        "test_missing_max_subtraction_fails_the_hard_rows", "test_mutating_an_input_fails",
        "test_patching_torch_and_builtins_and_the_grader_cannot_fake_a_pass",
        "test_results_cached_by_pointer_and_shape_fail", "test_two_launches_exceed_the_fused_limit",
        "test_wrong_only_in_bfloat16_fails_on_bfloat16_cases_only",
        "test_wrong_only_on_odd_shapes_fails_and_says_so"},
    "test_autograder_interfaces": {"test_an_unwritten_exercise_gets_the_not_written_hint",
        "test_an_honest_notebook_written_with_ipython_syntax_keeps_every_correctness_point",
        "test_a_notebook_that_calls_display_loads_as_in_jupyter",
        "test_check_prints_a_table_and_hint", "test_grade_exits_0_and_writes_the_json_object",
        "test_grade_returns_clamped_points_and_writes_nothing_to_stderr",
        "test_list_shows_every_exercise_with_notebook_points_and_signature", "test_unknown_exercise_exits_2",
        "test_unusable_input_exits_2_with_one_line"},
    "test_autograder_measure": {"test_correct_measurements_pass", "test_wrong_measurements_fail"},
    "test_bench": {"test_stopping_a_repeated_bench_stops_the_run_it_started"},
    "test_autograder_specs_05_08": {
        "test_a_layer_norm_backward_with_atomics_is_a_finding_with_the_notebooks_reason",
        "test_calling_the_taught_torch_operator_scores_zero_and_names_it",
        "test_correct_triton_submission_earns_every_correctness_point",
        "test_cross_entropy_that_materializes_the_full_logits_is_a_violation",
        "test_layer_norm_gelu_names_both_eager_launches_and_rejects_two_triton_launches",
        "test_list_shows_the_later_exercises_with_their_notebooks"},
    "test_autograder_specs_08": {"test_check_shows_the_memory_verdict_in_the_notebook",
        "test_correct_submission_earns_every_point_the_cpu_gives",
        "test_keeping_the_hidden_activation_costs_the_memory_points_and_says_why",
        "test_materializing_the_dequantized_weight_is_a_violation_naming_the_line",
        "test_memory_no_operator_allocated_is_counted_once_written",
        "test_plain_eager_autograd_is_a_violation",
        "test_a_tensor_is_sized_by_the_float32_elements_its_storage_holds",
        "test_a_weight_dequantized_in_pieces_all_kept_is_held_at_once",
        "test_an_inputs_storage_grown_to_hold_an_activation_counts_as_held",
        "test_memory_allocated_inside_an_operator_of_the_learners_own_is_counted",
        "test_torch_plumbing_around_an_honest_int8_kernel_keeps_every_correctness_point"},
    "test_autograder_specs_09": {"test_a_launch_per_head_breaks_the_launch_bound",
        "test_a_weight_modified_in_place_is_reported",
        "test_block_from_torch_operators_scores_zero_and_names_them",
        "test_correct_triton_block_earns_every_correctness_point", "test_list_shows_the_capstone"},
    "test_autograder_specs_10": {"test_cache_rows_copied_by_torch_are_a_violation",
        "test_list_shows_the_serving_exercises", "test_solution_earns_every_correctness_point",
        "test_the_sort_path_behind_a_token_kernel_scores_zero_and_names_the_operators"},
    "test_check_steps": {"test_each_step_of_the_solution_passes_its_check",
        "test_a_wrong_step_fails_its_own_check_and_says_where", "test_a_step_left_unwritten_is_named_not_written"},
    "test_batch_grading": {"test_a_killed_batch_resumes_and_a_killed_worker_costs_only_its_task",
        "test_a_review_list_flags_tampering_and_unreadable_files_in_every_place",
        "test_every_learner_gets_feedback_without_server_paths",
        "test_every_learner_is_in_every_class_output_with_a_status_and_reason",
        "test_local_cluster_pins_one_worker_to_each_visible_gpu",
        "test_one_line_per_learner_as_each_finishes_and_a_quiet_progress_bar",
        "test_results_are_keyed_on_the_grader_and_a_killed_forced_run_resumes_forced",
        "test_results_are_readable_by_the_course_group_and_reruns_skip",
        "test_scratch_goes_on_every_exit_a_process_can_catch_and_a_killed_ones_is_swept",
        "test_timestamps_from_nbgrader_collect_in_every_path"},
    "test_feedback": {"test_a_check_stopped_at_its_time_limit_shows_the_line_it_was_stuck_on",
        "test_check_computes_in_its_child_after_this_process_ran_operators_on_several_threads",
        "test_check_survives_a_crashing_kernel_and_names_the_likely_cause"},
    "test_foundation": {"test_kernel_defined_after_course_runs_in_interpreter_on_cpu",
        "test_size_override_and_bad_value", "test_reading_a_notebook_imports_no_iri_grammar"},
    "test_kernels_flash_attention": {"test_compiles_for_hopper_with_wgmma"},
    "test_kernels_matmul": {"test_compiles_for_hopper_with_wgmma"},
    "test_kernels_memory": {"test_int8_kernel_compiles_for_hopper"},
    "test_notebooks": {"test_harness_names_notebook_and_failing_cell",
        "test_a_kernel_that_dies_is_named_with_its_cell_and_the_earlier_outputs_are_kept",
        "test_student_notebook_matches_what_solutions_generate"},
    "test_recorder_bookkeeping_escapes": {
        "test_a_method_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls",
        "test_a_partial_set_on_one_of_torchs_subclasses_is_not_what_the_bookkeeping_calls",
        "test_a_profile_function_of_the_learners_is_refused_where_it_is_installed",
        "test_a_tensors_own_dict_with_a_key_of_the_learners_class_is_refused_before_it_is_hashed",
        "test_a_trace_function_of_the_learners_is_refused_where_it_is_installed",
        "test_an_argument_whose_class_is_a_property_runs_nothing_in_the_function_half",
        "test_the_class_of_an_operators_argument_is_not_hashed_by_the_bookkeeping"},
    "test_release": {"test_check_and_the_grader_run_from_the_handout_alone"},
    "test_sandbox": {"test_killing_the_group_ends_everything_inside", "test_no_capabilities_own_pids_and_no_secrets",
        "test_no_network_not_even_the_hosts_loopback", "test_torch_and_triton_work_with_their_cache_in_scratch",
        "test_writes_only_its_scratch_folder_and_a_private_tmp"},
    "test_solutions_graded": "*",
    "test_worker_start": {"test_a_grading_worker_is_ready_without_dynamo_inductor_or_what_the_audits_rules_name",
                          "test_a_worker_runs_the_text_the_grader_audited_whatever_the_file_holds_by_then"},
    "test_warm": {"test_a_hanging_warmer_is_cut_off_and_the_graded_worker_judges",
        "test_shared_out_every_case_is_run_once_and_the_warmers_are_gone_before_judging",
        "test_shared_cases_are_judged_as_the_graded_workers_own",
        "test_every_warmer_is_gone_before_the_graded_cases",
        "test_the_last_warmer_calls_the_timed_workload_first", "test_warmers_change_no_verdict",
        "test_the_warmer_autotuning_the_timed_workload_outlives_the_cases_and_its_wait_is_bounded",
        "test_an_exercise_left_as_handed_out_starts_no_warmers_and_scores_zero",
        "test_a_baseline_the_timing_opens_itself_has_the_wait_for_the_gpu_added_to_its_time_limit",
        "test_a_case_runs_the_config_its_number_pins_whatever_its_worker_ran_before",
        "test_the_graded_workers_own_refusals_are_judged_with_a_case_of_its_own"},
}
# Tests that execute notebooks (nbclient, nbgrader, JupyterLab): they are `worker` tests too.
NOTEBOOK_TESTS: dict[str, set[str] | str] = {
    "test_notebooks": {"test_solution_executes_top_to_bottom", "test_student_notebook_matches_what_solutions_generate"},
    "test_autograder_nbgrader": "*",
    "test_browser": "*",
}
# Tests that start no process but are the unit tier's slowest (5 s or more on an idle 2-core machine, 20 s or
# more under load): `slow`, out of the unit tier too (`make test` runs them).
SLOW_TESTS: dict[str, set[str] | str] = {
    "test_autograder_specs_05_08": {"test_layer_norm_mean_300_case_fails_the_one_pass_variance",
        "test_cross_entropy_large_logits_case_fails_without_the_max_subtraction",
        "test_flash_forward_grid_and_layout_mistakes_fail_check_and_the_grade"},
    "test_autograder_specs_08": {"test_cross_entropy_with_its_backward_earns_every_point_the_cpu_gives",
        "test_cross_entropy_that_keeps_every_chunk_of_logits_loses_the_memory_points_and_says_why",
        "test_tf32_slack_still_fails_every_wrong_gradient_where_it_failed_before",
        "test_the_gpu_slack_tool_judges_each_way_of_computing_before_and_now"},
    "test_autograder_specs_09": {"test_tolerances_pass_eager_pytorch_and_fail_the_bugs_of_a_block"},
    "test_autograder_specs_10": {"test_untouched_notebook_scores_zero"},
    "test_batch_grading": {"test_record_takes_hidden_cell_scores_from_the_trusted_result_not_the_kernel"},
    "test_feedback": {"test_every_axis_and_layout_the_grade_varies_a_public_case_varies"},
    "test_flash_rounding": "*",
    "test_autograder_escapes": {"test_every_escape_says_why_points_were_withheld"},
    "test_kernels_gpt": {"test_measurement_reports_time_memory_and_kernels_against_eager",
        "test_every_ablation_computes_the_same_step"},
    "test_kernels_flash_attention": {"test_autograd_function"},
}

UNIT_TIER = os.environ.get("COURSE_TEST_TIER") == "unit"


def _listed(table: dict, item) -> bool:
    names = table.get(item.module.__name__.rsplit(".", 1)[-1], ())
    return names == "*" or item.originalname in names


def _module_fixtures(item) -> list[str]:
    """The module- or session-scoped fixtures defined in the item's own test module that it uses."""
    module = item.nodeid.split("::", 1)[0]
    return sorted(name for name, defs in item._fixtureinfo.name2fixturedefs.items()
                  if defs[-1].scope in ("module", "session") and defs[-1].baseid == module)


# tryfirst: xdist's test process reads the xdist_group marks in its own hook of this name (it names each
# test after its group there), and pluggy would call that hook before this one.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            pass  # the test names its group: that of the solution notebook whose grade it reads (tests/_solutions.py)
        elif getattr(item.module, "graded", None) is not None:
            # a module's tests grade the same submissions one after another in one process (`make test`'s
            # --dist loadgroup keeps a module together), never waiting for each other's grading: the run shares
            # each grading (tests/_autograder_helpers.graded), and a test that asks for one another process is
            # making waits for it
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
        elif shared := _module_fixtures(item):
            # a fixture made once per module is made once per process: its tests stay in one process,
            # or each of the two builds it (the graded class, nbgrader's regenerated notebooks)
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{'+'.join(shared)}"))
        notebook = "notebook" in item.keywords or _listed(NOTEBOOK_TESTS, item)
        if notebook:
            item.add_marker(pytest.mark.notebook)
        if notebook or "browser" in item.keywords or _listed(WORKER_TESTS, item):
            item.add_marker(pytest.mark.worker)
        if _listed(SLOW_TESTS, item):
            item.add_marker(pytest.mark.slow)
    if course.ON_GPU:
        return
    reason = ("needs a CUDA GPU: none is visible here (`make test` hides any, as on CI; on a GPU machine "
              "`make gpu-test` runs these)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


_LOST_GROUPS = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Under `--dist loadgroup`, xdist has named each grouped test after its group by now: a group without its
    name in the test's id is a group xdist will not keep together (each process would build the class)."""
    if not getattr(session.config.option, "loadgroup", False):  # set in xdist's test processes only
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
    if lost:
        session.config.stash[_LOST_GROUPS] = (
            f"pytest-xdist's --dist loadgroup did not take the xdist_group marks ({len(lost)} tests): this pytest "
            "names tests in a way this pytest-xdist cannot change; install the versions pyproject.toml's dev "
            "extra admits (`tools/ensure_venv.sh dev`)")


def pytest_runtest_setup(item):
    if lost := item.config.stash.get(_LOST_GROUPS, None):
        pytest.fail(lost, pytrace=False)  # every test, so that no run passes with its groups lost


class StartsAProcess(RuntimeError):
    pass


def _refuse(what: str):
    raise StartsAProcess(f"{what} in the unit tier (make check): list this test in tests/conftest.py's "
                         "WORKER_TESTS (it then runs in make test)")


def _is_python(args) -> bool:
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or [])
    first = os.path.basename(str(argv[0])) if argv else ""
    # a sandboxed worker's command line starts with the sandbox (bwrap ... python -m autograder.worker)
    return sys.executable in map(str, argv) or first.startswith(("python", "jupyter", "nbgrader", "dask"))


def _share_gradings(config) -> None:
    """One folder of gradings for the whole run (tests/_autograder_helpers.graded), made by the process that
    starts it: pytest-xdist starts its test processes later, and they inherit this environment. Made afresh for
    every run, so no grading outlives the run that made it."""
    from _autograder_helpers import GRADES

    if hasattr(config, "workerinput"):
        return
    folder = tempfile.mkdtemp(prefix="course-test-grades-")
    os.environ[GRADES] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


COMPILED = ("autograder", "course", "measure", "kernels_ref", "tools", "nbgrader_config.py")


def _compile_the_course(config) -> None:
    """Bytecode for the course's own modules, written once per run by the process that starts it. Every grading
    worker, notebook kernel, grading command and Dask worker the suite starts is a new Python that imports them;
    where Python writes no bytecode (PYTHONDONTWRITEBYTECODE, as on the 2-core development machine) each one
    compiled them from source: 0.15-0.2 s of CPU a process (the grader's 47 modules: 0.20 s, 0.03 s from
    bytecode), several hundred processes a run. Never tests/: a submission with bytecode beside it is a finding
    (tests/submissions)."""
    import compileall

    if hasattr(config, "workerinput"):
        return
    root = Path(__file__).resolve().parent.parent
    for name in COMPILED:
        path = root / name
        if path.is_dir():
            compileall.compile_dir(path, quiet=1)
        elif path.exists():
            compileall.compile_file(path, quiet=1)


def pytest_configure(config):
    _compile_the_course(config)
    _share_gradings(config)
    # pytest-xdist's controller starts the test processes and runs no test: the refusal is for tests
    if not UNIT_TIER or (getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")):
        return
    import multiprocessing.util

    popen_init = subprocess.Popen.__init__

    def popen(self, args, *a, **k):
        if _is_python(args):
            _refuse(f"starts a Python process ({args if isinstance(args, str) else ' '.join(map(str, args))[:80]})")
        popen_init(self, args, *a, **k)

    subprocess.Popen.__init__ = popen
    os.fork = lambda: _refuse("forks a process (a check() child?)")
    multiprocessing.util.spawnv_passfds = lambda *a, **k: _refuse("starts a multiprocessing process")


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    # Fresh random inputs on every run, but reproducible within one: the seed is printed on failure.
    seed = torch.seed() % 2**31
    torch.manual_seed(seed)
    request.node.user_properties.append(("seed", seed))
    yield
