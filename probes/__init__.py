"""The lab beside the course: GPU probes that find out why a kernel or the grader's timing is short of its
goal (launch configurations, launch cost, the protocol's timeline, registers and spills, where grading time
goes). Nothing of the course, the grader or the notebooks imports them; their tests run apart from the
course's (`make probes-test`), and what they found is in results/NOTES.md and docs/performance.md."""
