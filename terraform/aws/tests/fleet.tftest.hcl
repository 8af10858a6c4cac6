# The module's logic with a mock provider: nothing is created, no cloud is asked.
mock_provider "aws" {}

variables {
  controller_ip  = "198.51.100.7"
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO2L5dGqQz5bq3r0tCqq6Wm8u5v1xk7Zr4eQeWnP7l3M test"
  image          = "ami-0123456789abcdef0"
  worker_count   = 3
}

run "three_workers_answer_only_the_controller" {
  command = apply

  assert {
    condition     = length(aws_instance.worker) == 3
    error_message = "worker_count = 3 must make 3 instances"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.worker_port.cidr_ipv4 == "198.51.100.7/32"
    error_message = "the worker port must admit the controller's address alone"
  }
  assert {
    condition     = keys(aws_vpc_security_group_ingress_rule.ssh) == ["198.51.100.7/32"]
    error_message = "SSH defaults to the controller's address alone"
  }
  assert {
    condition     = alltrue([for w in aws_instance.worker : w.metadata_options[0].http_tokens == "required"])
    error_message = "the token is in the user data: IMDSv2 only"
  }
  assert {
    condition     = length(output.workers) == 3 && alltrue([for w in output.workers : endswith(w, ":7700")])
    error_message = "workers lists HOST:PORT for each worker"
  }
  assert {
    condition     = length(regexall("ansible_host=", output.ansible_inventory)) == 3
    error_message = "the inventory lists every worker"
  }
  assert {
    condition     = length(nonsensitive(output.token)) == 64
    error_message = "a generated token of two UUIDs' hex digits"
  }
}

run "private_addresses_come_from_the_subnet" {
  command = apply

  variables {
    public_ips   = false
    network_cidr = "198.18.0.0/24"
    subnet_cidr  = "198.18.0.0/24"
    worker_count = 2
  }

  assert {
    condition     = output.workers == ["198.18.0.10:7700", "198.18.0.11:7700"]
    error_message = "without public addresses, the workers are listed by their private ones"
  }
}

run "the_world_is_never_admitted" {
  command = plan

  variables {
    controller_ip = "0.0.0.0"
  }

  expect_failures = [var.controller_ip]
}

run "no_admin_network_may_be_the_whole_internet" {
  command = plan

  variables {
    admin_cidrs = ["192.0.2.0/24", "0.0.0.0/0"]
  }

  expect_failures = [var.admin_cidrs]
}

run "a_cidr_is_not_a_controller_address" {
  command = plan

  variables {
    controller_ip = "198.51.100.0/24"
  }

  expect_failures = [var.controller_ip]
}

run "a_fleet_has_at_least_one_worker" {
  command = plan

  variables {
    worker_count = 0
  }

  expect_failures = [var.worker_count]
}
