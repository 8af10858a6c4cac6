# What Ansible and the controller need. terraform/hetzner has the same outputs.

locals {
  addresses = [for w in aws_instance.worker : var.public_ips ? w.public_ip : w.private_ip]
}

output "workers" {
  description = "HOST:PORT of every worker: `terraform output -json workers > workers.json`, then `volley --workers @workers.json`."
  value       = [for a in local.addresses : "${a}:${var.worker_port}"]
}

output "addresses" {
  description = "The address of every worker that the controller and Ansible reach."
  value       = local.addresses
}

output "private_addresses" {
  description = "Every worker's address on the private network."
  value       = aws_instance.worker[*].private_ip
}

output "ansible_inventory" {
  description = "An Ansible inventory (INI): `terraform output -raw ansible_inventory > inventory.ini`."
  value = templatefile("${path.module}/../templates/ansible-inventory.ini.tftpl", {
    name      = var.name
    addresses = local.addresses
    port      = var.worker_port
  })
}

output "token" {
  description = "The workers' bearer token: `terraform output -raw token > token`, then --token-file token."
  value       = local.token
  sensitive   = true
}
